"""The function sink: ``type: python``, a user function called with each batch."""
