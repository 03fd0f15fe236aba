"""The paper models' hub ids, for the shapes and tokenizer tests."""

from __future__ import annotations

GPT2, PYTHIA, LLAMA = "openai-community/gpt2", "EleutherAI/pythia-160m", "JackFram/llama-160m"
