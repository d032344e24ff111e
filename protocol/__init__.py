"""Kafka's wire protocol as pure code: no sockets, no files, no clocks.

Message codec (generated from Kafka 3.9's JSON message definitions):

- ``schemas/``   the bundled definitions (``scripts/import_schemas.py`` refreshes them);
- ``schema``     the definitions as typed objects;
- ``codegen``    Python source of each message's classes and per-version codecs
  (``codegen_common``, ``codegen_encode``, ``codegen_decode`` hold the emitters);
- ``messages``   the classes (``from protocol.messages import ProduceRequest``), built on
  first use, with ``encode``/``encoded_size``/``encode_parts``/``decode``/``decode_from``;
- ``api_keys``   ``ApiKey``, ``API_SPECS`` and the request/response header-version rules;
- ``headers``    request/response headers (cheap request-header parsing for routing);
- ``framing``    size-prefixed request/response frames;
- ``errors``     Kafka's error codes (``Errors``), retriability, ``KafkaApiError``;
- ``wire``       varints and the error helpers the generated code uses;
- ``exceptions`` the typed errors every decoder raises (``ProtocolError`` and subclasses).

Record batches and compression live in ``protocol.records``.
"""
