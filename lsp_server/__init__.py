"""specfill's language server: thin LSP handlers over the prompt and decoding modules."""
