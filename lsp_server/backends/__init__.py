"""What answers a completion request: the `Backend` protocol (`backend`), the model in this
process (`local`, with the prompt planner and the background read), an HTTP client of a
serving engine (`remote`), the model thread that runs either (`worker`) and the pool that
shares workers between sessions asking for the same model (`worker_pool`).

May import: the pure modules at `lsp_server`'s top (settings, postprocess, words), `prompts`,
`speculative`. Never `lsp_server.session` or `lsp_server.shared`, never `bench`.
"""
