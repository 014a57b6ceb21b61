"""Models a user can get from the editor: the curated list (`catalog`) and the download that
fetches one on request (`pull`, with huggingface_hub), never at completion time.

May import: `speculative` (the cache folder, the model file checks) and huggingface_hub.
Never `lsp_server.session`, `lsp_server.backends`, `lsp_server.shared` or `bench`.
"""
