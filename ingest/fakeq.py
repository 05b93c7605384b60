"""The fake-queue CLI at its documented name: ``python -m ingest.fakeq`` runs ``ingest.tools.fakeq``."""

import sys

from ingest.tools.fakeq import main

if __name__ == "__main__":
    sys.exit(main())
