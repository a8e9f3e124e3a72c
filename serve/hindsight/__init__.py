"""The Hindsight-compatible surface: hindsight-client 1.1.0's routes and shapes under
``/hindsight``, and Hindsight's MCP tools at ``/hindsight/mcp/``, so Hindsight's integrations
run on Memlane with only their URL changed (docs/hindsight.md).

Another surface of the catalogue's operations (memlane/catalogue.py declares each one's routes
and tools here; tests/serving/test_catalogue.py checks them), not another engine:

* ``bank_ids``: Hindsight's bank ids and Memlane's, one reversible mapping;
* ``requests`` and ``answers``: the translation, in and out (field names, tag modes, defaults,
  nulls, statuses);
* ``surface``: each operation of the surface over a backend, with this surface's rules (a
  write creates a missing bank); ``backend``: the Ingress replica's paths;
* ``routes`` (HTTP) and ``mcp`` (the MCP tools), thin over ``surface``.
"""
