"""The class-archive builder at its documented name: ``python -m ingest.cds`` runs ``ingest.tools.cds``."""

import sys

from ingest.tools.cds import main

if __name__ == "__main__":
    sys.exit(main())
