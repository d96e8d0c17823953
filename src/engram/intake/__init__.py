"""What comes in: each field of a message checked; content parts and blocks made messages."""
