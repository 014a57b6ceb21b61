"""One editor's LSP session: the handlers (`server`), the protocol that answers every request,
the pipeline from cursor to suggestion (type-through cache, debounce, supersede), what may be
completed and what may enter a prompt (`controls`), the context gathered from the editor
(`context`, `workspace`, `chunks`), the stats and the log forwarded to the editor.

May import: `lsp_server.backends`, the pure modules at `lsp_server`'s top (settings,
postprocess, words), `prompts`, `speculative`. Never `lsp_server.shared`, never `bench`.
"""
