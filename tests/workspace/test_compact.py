"""Entities kept in a workspace are compacted (shared fields set, shared empty containers)
without changing what they dump, equal or hash to, and a change in place is refused."""

from __future__ import annotations

import copy
import pickle

import pytest

from coworkenv.workspace import (
    Comment,
    Document,
    Email,
    Entity,
    WorkspaceState,
    apply_event,
)


def ws_event(app: str, op: str, entity: Entity) -> tuple[str, dict[str, object]]:
    """A state event as a tool emits it."""
    return f"ws.{app}.{op}", {"id": entity.id, "data": entity.model_dump(mode="json")}


def _state_with(*entities: tuple[str, str, object]) -> WorkspaceState:
    state = WorkspaceState()
    for app, op, entity in entities:
        kind, payload = ws_event(app, op, entity)  # type: ignore[arg-type]
        apply_event(state, kind, payload, entity)  # type: ignore[arg-type]
    return state


def test_compacted_entities_dump_equal_and_hash_as_replayed_ones() -> None:
    live = Email(id="e1", sender="p1", to=["p2"], subject="status", body="ok")
    kind, payload = ws_event("email", "sent", live)
    a, b = WorkspaceState(), WorkspaceState()
    apply_event(a, kind, payload, live)  # the live path (the tool's entity)
    apply_event(b, kind, payload)  # replay (validated from the payload)
    assert a.emails["e1"] == b.emails["e1"]
    assert a.emails["e1"].model_dump(mode="json") == payload["data"]
    assert a.state_hash() == b.state_hash()
    # one fields set for every email in a workspace, one empty list for every empty list
    other = Email(id="e2", sender="p1", to=["p3"])
    apply_event(a, *ws_event("email", "sent", other), other)
    assert a.emails["e1"].__pydantic_fields_set__ is a.emails["e2"].__pydantic_fields_set__
    assert a.emails["e1"].cc is a.emails["e2"].attachments


def test_a_change_in_place_is_refused_and_model_copy_still_works() -> None:
    doc = Document(id="d1", title="Plan", owner="p1",
                   comments=[Comment(author="p1", text="first")])
    state = _state_with(("docs", "created", doc))
    kept = state.docs["d1"]
    with pytest.raises(TypeError, match="never changed in place"):
        kept.permissions["p2"] = "view"
    e = Email(id="e9", sender="p1", to=["p2"])
    with pytest.raises(TypeError, match="never changed in place"):
        _state_with(("email", "sent", e)).emails["e9"].read_by.append("p1")
    with pytest.raises(AttributeError):
        kept.title = "Renamed"  # (a new value is an event, never an attribute set)
    new = kept.model_copy(update={"permissions": {"p2": "view"}, "status": "approved"})
    assert new.permissions == {"p2": "view"} and kept.permissions == {}
    assert {"permissions", "status"} <= new.model_fields_set
    new.permissions["p3"] = "edit"  # a copy's containers are its own
    nested = kept.comments[0]
    assert nested.__pydantic_fields_set__ == frozenset(Comment.model_fields)
    for clone in (copy.deepcopy(kept), pickle.loads(pickle.dumps(kept))):
        assert clone == kept
        clone.permissions["p4"] = "view"  # copies hold ordinary containers
        assert type(clone.permissions) is dict


def test_kept_entities_cost_a_fraction_of_validated_ones() -> None:
    """A kept entity is a new object whose attributes share their keys with every other kept
    entity of its model (and its fields set, and empty containers): 200 emails kept in a state
    take well under half of what the 200 validated emails they came from take."""
    import gc
    import tracemalloc

    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        emails = [Email(id=f"e{i}", sender="p1", to=["p2", f"p{i}"], subject=f"s{i}",
                        body="b" * 40, labels={"p2": ["inbox"]}) for i in range(200)]
        validated = tracemalloc.get_traced_memory()[0] - before
        state = WorkspaceState()
        before = tracemalloc.get_traced_memory()[0]
        for e in emails:
            apply_event(state, *ws_event("email", "sent", e), e)  # type: ignore[arg-type]
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept < validated * 0.45, (kept, validated)
    assert all(state.emails[e.id] == e and state.emails[e.id] is not e for e in emails)


def test_a_growing_thread_keeps_its_earlier_items_and_compacts_the_new_one() -> None:
    doc = Document(id="d1", title="Plan", owner="p1",
                   comments=[Comment(author="p1", text=str(i)) for i in range(3)])
    state = _state_with(("docs", "created", doc))
    kept = state.docs["d1"]
    grown = kept.model_copy(update={"comments": [*kept.comments,
                                                 Comment(author="p2", text="new")]})
    state = _state_with(("docs", "created", doc), ("docs", "commented", grown))
    now = state.docs["d1"]
    assert now == grown
    assert all(a is b for a, b in zip(now.comments[:3], kept.comments, strict=True))
    assert now.comments[3] is not grown.comments[3]  # the new one, kept its own way
    assert {type(c.__pydantic_fields_set__) for c in now.comments} == {
        type(kept.__pydantic_fields_set__)}
