"""Memlane inside agent frameworks. Each integration is a module importing its framework
(installed by its extra, e.g. ``pip install 'memlane[langgraph]'``); ``import memlane`` imports
none of them, and nothing in the engine imports this package."""
