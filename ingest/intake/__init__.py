"""Receiving: receiver threads, the stager and its files, the envelope, leases' acker, recovery."""
