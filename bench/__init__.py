"""Benchmarks and developer tools: `specfill bench`, `bench-lsp`, `bench-llama-server`, `bench-ttft`, `stress`, `demo`,
`workload` and the schema writer. The server never imports this package."""
