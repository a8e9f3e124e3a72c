"""The README examples of hindsight-langgraph 0.3.1, hindsight-agno 0.4.20 and hindsight-litellm
0.5.4 (each wheel's METADATA, quoted section by section), run against Memlane's
Hindsight-compatible surface at ``base`` (tests/serving/test_hindsight.py).

Each block is the README's with only the URL changed, the key from ``HINDSIGHT_API_KEY`` (as
the READMEs say), and, where a block needs a chat model, an offline one in its place: a
scripted LangChain chat model that calls the tools as a model would (ChatOpenAI needs the
network), litellm's own ``mock_response``. Agno's agent model is not run: the toolkit's tools
are called as its agent calls them, with a RunContext. After each block, what the user would
see is checked (a tool's answer, a recalled memory, an injected context)."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult


class ScriptedChat(BaseChatModel):
    """A chat model that answers from a script: tool calls, then a reply."""

    replies: list[AIMessage]

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChat:
        return self

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self.replies.pop(0))])


def calls(*tool_calls: tuple[str, dict[str, Any]], then: str = "Done.") -> ScriptedChat:
    """A model that calls these tools once, then answers ``then``."""
    first = AIMessage(
        content="",
        tool_calls=[{"name": n, "args": a, "id": f"call-{i}"} for i, (n, a) in enumerate(tool_calls)],
    )
    return ScriptedChat(replies=[first, AIMessage(content=then)])


def in_own_loop(make: Callable[[], Awaitable[Any]]) -> Any:
    """Run the coroutine ``make()`` gives in an event loop of its own, on another thread: the
    sync hindsight-client keeps one loop in this thread, which ``asyncio.run`` here would
    replace (its session then fails on the new loop)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(lambda: asyncio.run(make())).result()


def documents(base: str, bank: str, **query: Any) -> Any:
    """The bank's documents through the client's generated (async) API."""
    from hindsight_client import Hindsight

    async def main() -> Any:
        # the key where the READMEs say it goes (the examples' own calls read it there too)
        client = Hindsight(base_url=base, api_key=os.environ.get("HINDSIGHT_API_KEY"), timeout=60)
        try:
            return await client.documents.list_documents(bank, **query)
        finally:
            await client.aclose()

    return in_own_loop(main)


def _tool_answers(result: dict[str, Any]) -> dict[str, str]:
    return {m.name: m.content for m in result["messages"] if isinstance(m, ToolMessage)}


# hindsight-langgraph ------------------------------------------------------------------------------
def langgraph_examples(base: str) -> None:
    in_own_loop(lambda: _langgraph(base))


async def _langgraph(base: str) -> None:
    from hindsight_langgraph import configure, create_hindsight_tools
    from langgraph.prebuilt import create_react_agent

    # README: Self-hosted instance
    configure(
        hindsight_api_url=base,
    )

    # README: Quick Start: Tools (ChatOpenAI(model="gpt-4o") -> a scripted model)
    tools = create_hindsight_tools(bank_id="user-123")

    agent = create_react_agent(
        calls(("hindsight_retain", {"content": "I prefer dark mode"})),
        tools=tools,
    )

    result = await agent.ainvoke(
        {"messages": [{"role": "user", "content": "Remember that I prefer dark mode"}]}
    )
    assert _tool_answers(result) == {"hindsight_retain": "Memory stored successfully."}

    # README: Dynamic Bank IDs with Tools
    tools = create_hindsight_tools(bank_id_from_config="user_id")
    agent = create_react_agent(calls(("hindsight_retain", {"content": "I prefer light mode"})), tools=tools)

    result = await agent.ainvoke(
        {"messages": [{"role": "user", "content": "Remember that I prefer dark mode"}]},
        config={"configurable": {"user_id": "user-456"}},
    )
    assert _tool_answers(result) == {"hindsight_retain": "Memory stored successfully."}

    # The tools' recall, through the same agent: what each bank holds
    agent = create_react_agent(calls(("hindsight_recall", {"query": "Which mode do I prefer?"})), tools=tools)
    result = await agent.ainvoke(
        {"messages": [{"role": "user", "content": "Which mode do I prefer?"}]},
        config={"configurable": {"user_id": "user-456"}},
    )
    recalled = _tool_answers(result)["hindsight_recall"]
    assert "light mode" in recalled and "dark mode" not in recalled  # user-456's bank only

    # README: Quick Start: Memory Nodes (agent_node: "your LLM node")
    from hindsight_langgraph import create_recall_node, create_retain_node
    from langgraph.graph import END, START, MessagesState, StateGraph

    def agent_node(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(content="Noted, Ana.")]}

    recall = create_recall_node(bank_id="user-123")
    retain = create_retain_node(bank_id="user-123")

    builder = StateGraph(MessagesState)
    builder.add_node("recall", recall)
    builder.add_node("agent", agent_node)  # your LLM node
    builder.add_node("retain", retain)

    builder.add_edge(START, "recall")
    builder.add_edge("recall", "agent")
    builder.add_edge("agent", "retain")
    builder.add_edge("retain", END)

    graph = builder.compile()
    result = await graph.ainvoke(
        {"messages": [{"role": "user", "content": "Which display mode do I prefer?"}]}
    )
    [context] = [m for m in result["messages"] if isinstance(m, SystemMessage)]
    assert context.content.startswith("Relevant memories about this user:") and "dark mode" in context.content

    # README: Dynamic Bank IDs (nodes)
    recall = create_recall_node(bank_id_from_config="user_id")
    retain = create_retain_node(bank_id_from_config="user_id")
    builder = StateGraph(MessagesState)
    for name, node in (("recall", recall), ("agent", agent_node), ("retain", retain)):
        builder.add_node(name, node)
    builder.add_edge(START, "recall")
    builder.add_edge("recall", "agent")
    builder.add_edge("agent", "retain")
    builder.add_edge("retain", END)
    graph = builder.compile()

    # Bank ID resolved at runtime
    result = await graph.ainvoke(
        {"messages": [{"role": "user", "content": "hello"}]},
        config={"configurable": {"user_id": "user-456"}},
    )
    assert result["messages"][-1].content == "Noted, Ana."

    # README: Quick Start: Memory Instructions
    from hindsight_langgraph import memory_instructions

    get_instructions = memory_instructions(
        bank_id="user-123",
        base_instructions="You are a helpful assistant.",
    )

    # Each call re-fetches memories, so it stays up to date
    instructions = await get_instructions()
    assert instructions.startswith("You are a helpful assistant.") and "dark mode" in instructions


# hindsight-agno ---------------------------------------------------------------------------------
def agno_examples(base: str) -> None:
    from agno.run.base import RunContext
    from hindsight_agno import HindsightTools, configure, memory_instructions

    # README: Global Configuration (the key: HINDSIGHT_API_KEY, as its comment says)
    configure(
        hindsight_api_url=base,
        budget="mid",  # Recall budget: low/mid/high
        max_tokens=4096,  # Max tokens for recall results
    )

    # README: Quick Start (the agent's model is not run: its tool calls are made as it makes them)
    toolkit = HindsightTools(bank_id="user-123", hindsight_api_url=base)
    ctx = RunContext(run_id="r1", session_id="s1", user_id="ana")
    assert toolkit.retain_memory(ctx, "I prefer dark mode") == "Memory stored successfully."
    assert "dark mode" in toolkit.recall_memory(ctx, "What are my preferences?")
    answer = toolkit.reflect_on_memory(ctx, "What are my preferences?")
    assert answer.strip() and not answer.startswith("Error")

    # README: With Memory Instructions
    instructions = memory_instructions(bank_id="user-123", hindsight_api_url=base)
    assert instructions.startswith("Relevant memories:") and "dark mode" in instructions

    # README: Bank Resolution (per-user banks from RunContext, and a custom resolver)
    per_user = HindsightTools(hindsight_api_url=base)
    assert per_user.retain_memory(RunContext(run_id="r2", session_id="s2", user_id="agno-7"), "I like tea")

    def resolve_bank(ctx: Any) -> str:
        return f"team-{ctx.user_id}"

    team = HindsightTools(bank_resolver=resolve_bank, hindsight_api_url=base)
    team.retain_memory(RunContext(run_id="r3", session_id="s3", user_id="agno-7"), "Our standup is at 9.")
    assert "standup" in team.recall_memory(
        RunContext(run_id="r4", session_id="s3", user_id="agno-7"), "standup"
    )
    assert "tea" in per_user.recall_memory(
        RunContext(run_id="r5", session_id="s2", user_id="agno-7"), "drinks"
    )


# hindsight-litellm ------------------------------------------------------------------------------
def litellm_examples(base: str, monkeypatch: Any) -> None:
    # litellm fetches a price map from the internet at import unless told to use its own copy
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import hindsight_litellm

    try:
        _litellm(base, hindsight_litellm)
    finally:
        hindsight_litellm.disable()
        hindsight_litellm.cleanup()
    # the conversations were stored, in the background (its default): wait for them
    for _ in range(120):
        docs = documents(base, "my-agent", q="You like purple")
        if docs.items:
            break
        time.sleep(0.5)
    assert docs.items, "the completion's conversation was not stored"
    assert not hindsight_litellm.get_pending_storage_errors()


def _litellm(base: str, hindsight_litellm: Any) -> None:
    from hindsight_litellm import configure, recall, reflect, retain, set_defaults

    # README: Retain - Store memories
    configure(hindsight_api_url=base)
    set_defaults(bank_id="my-agent")
    result = retain(
        content="Critical information that must be stored: my favourite colour is purple",
        context="Important data",
        sync=True,  # Block until storage completes
    )
    assert result.success

    # README: Recall - Query raw memories
    memories = recall("what is my favourite colour?", budget="mid")
    assert any("purple" in m.text for m in memories)
    assert {m.fact_type for m in memories} <= {"world", "experience", "observation"}

    # README: Reflect - Get synthesized context
    result = reflect("what do you know about the user's preferences?")
    assert result.text.strip()

    # README: Quick Start (model: litellm's offline mock_response)
    hindsight_litellm.configure(
        hindsight_api_url=base,
        verbose=True,
    )
    hindsight_litellm.set_defaults(
        bank_id="my-agent",
        use_reflect=True,  # Use reflect for synthesized context
    )
    hindsight_litellm.enable()
    response = hindsight_litellm.completion(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "What did we discuss about purple?"}],
        hindsight_query="What do I know about the user's favourite colour?",  # Required!
        mock_response="You like purple.",
    )
    assert response.choices[0].message.content == "You like purple."
    debug = hindsight_litellm.get_last_injection_debug()
    assert debug is not None and debug.mode == "reflect", debug
    assert debug.error is None and debug.injected, repr(debug.error)

    # README: Memory Modes: Reflect vs Recall (recall mode)
    hindsight_litellm.set_defaults(bank_id="my-agent", use_reflect=False)
    hindsight_litellm.completion(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "Which colour?"}],
        hindsight_query="favourite colour",
        mock_response="Purple.",
    )
    debug = hindsight_litellm.get_last_injection_debug()
    assert debug is not None and debug.mode == "recall" and debug.error is None
    assert "purple" in debug.memory_context
