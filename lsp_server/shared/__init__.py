"""The shared server: one per user and build, reached by every editor window. `attach` (what
the editors run: standard library only, so it starts fast) dials the user's socket or starts
the `daemon`, which runs a session per connection; `status` reports on it.

May import: `lsp_server.session` and `lsp_server.backends` (the daemon), the pure modules at
`lsp_server`'s top. Never `bench`.
"""
