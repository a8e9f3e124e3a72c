"""Retain: turn conversations into chunks, memory units, entities and links."""
