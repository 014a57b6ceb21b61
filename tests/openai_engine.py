"""`python -m llama_cpp.server`, as the remote-engine tests start it.

The server's own main, unchanged, after one step it lacks: llama.cpp's AMX extra buffer type
crashed one machine, so it is taken out of the list before the model loads, as specfill's
engine does. Usage: python tests/openai_engine.py --model M --host 127.0.0.1 --port P ...
"""

import runpy
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from speculative.cpu_buffers import extra_buffer_types  # noqa: E402

if __name__ == "__main__":
    extra_buffer_types()
    sys.argv[0] = "llama_cpp.server"
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
