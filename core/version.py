"""The release, as the CLI, the server's OpenAPI document and replies, and the tuning cache's keys report it: a
module of its own so that any package can read it without importing the package's public API."""

__version__ = "0.1.0"
