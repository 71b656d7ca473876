"""The snowline.v1 wire API: ``snowline_pb2`` and ``snowline_pb2_grpc``, generated at build time from
proto/snowline/v1/snowline.proto (never committed). Most code wants :mod:`snowline` instead."""
