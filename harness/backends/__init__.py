"""Generation backends below the stages that generate: transformers model loading (``loading``), llama.cpp
(``llama_cpp``, ``llama_server``), the OpenAI-compatible HTTP client (``http``), the offline model files and
the GGUF ladder (``offline_models``, ``gguf_ladder``) and the response cache every generator answers through
(``response_cache``). The reader stage (``harness.read``) and the trees' chat LMs (``harness.lm``) import
this layer and never each other; nothing here imports a stage.
"""
