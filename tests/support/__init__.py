"""Helpers the test layers share: job configs and runs, polling, the queue servers and emulator wiring."""
