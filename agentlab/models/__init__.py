"""Real models behind `agent_loop`: adapters from the official SDK clients, and the conversions they use.

    from openai import AsyncOpenAI
    from agentlab.models import openai_chat

    model = openai_chat(AsyncOpenAI(), "gpt-4.1-mini", tools)
    result = await agent_loop("Find book A", model, tools)

Three wire formats, each a module of pure conversion functions (history to
the provider's messages, the provider's response to a decision):
`openai_chat` (Chat Completions, which every OpenAI-compatible local server
speaks too: Ollama, llama.cpp's server, vLLM, LM Studio), `openai_responses`
(the Responses API) and `anthropic_messages` (Anthropic Messages).

You pass your own client (`openai.AsyncOpenAI`, `anthropic.AsyncAnthropic`):
this package imports no SDK, here or in `import agentlab`. Install them with
`pip install 'agentlab[openai]'` or `'agentlab[anthropic]'`.
"""

from __future__ import annotations

from agentlab.models.adapters import anthropic_messages, openai_chat, openai_responses

__all__ = ["anthropic_messages", "openai_chat", "openai_responses"]
