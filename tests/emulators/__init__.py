"""Protocol emulators of cloud services on 127.0.0.1, for tests and local development (not in the wheel)."""
