"""Reads: queries against the brokers (through the SDK) and the console database, shaped for the API."""
