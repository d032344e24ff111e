"""The broker's network layer: SocketServer, Processors, RequestChannel and handler pool."""
