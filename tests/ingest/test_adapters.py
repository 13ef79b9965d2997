"""Adapters from LoCoMo, LongMemEval and chat files to utterance events, on hand-written fixtures.

The fixtures in ``tests/fixtures/`` are written for these tests in the published shapes; no
benchmark content is copied. One test reads the shared LoCoMo file when it exists.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from datetime import datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from uac_kernel import Workbench
from uac_kernel.core.errors import EventError
from uac_kernel.ingest.adapters import (
    FORMATS,
    detect_format,
    locomo_questions,
    locomo_samples,
    longmemeval_questions,
    read_events,
    read_histories,
)
from uac_kernel.ingest.events import InputEvent

FIXTURES = Path(__file__).parent.parent / "fixtures"
LOCOMO = FIXTURES / "locomo_mini.json"
LONGMEMEVAL = FIXTURES / "longmemeval_mini.json"
REAL_LOCOMO = Path("/work/shared/data/locomo/locomo10.json")


def rows(events: list[InputEvent]) -> list[tuple[str, str, str, str | None]]:
    """(ts, speaker, text, source) of each event."""
    return [(e.ts.isoformat(), e.payload["speaker"], e.payload["text"], e.source) for e in events]


def load(path: Path) -> Any:
    return json.loads(path.read_text())


def dump(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data))
    return path


def error_text(path: Path, fmt: str | None = None) -> str:
    with pytest.raises(EventError) as info:
        list(read_events(path, fmt))
    return str(info.value)


# -- LoCoMo --------------------------------------------------------------------------------


def test_locomo_turns_in_numeric_session_order_with_dates_images_and_sources() -> None:
    events = list(read_events(LOCOMO, "locomo"))
    assert rows(events) == [
        (
            "2023-05-08T13:56:00",
            "Ann",
            "I signed up for pottery classes this week!",
            "locomo:conv-a:D1:1",
        ),
        ("2023-05-08T13:56:30", "Ben", "Nice! Which studio?", "locomo:conv-a:D1:2"),
        (
            "2023-05-08T13:57:00",
            "Ann",
            "The one by the river. Here is my first bowl. [shares an image: a photo of a blue bowl on a table]",
            "locomo:conv-a:D1:3",
        ),
        ("2023-06-16T10:04:00", "Ben", "My old bike finally broke.", "locomo:conv-a:D2:1"),
        ("2023-06-16T10:04:30", "Ann", "Oh no, you had it since 2021!", "locomo:conv-a:D2:2"),
        (
            "2023-09-13T00:09:00",
            "Ben",
            "Can't sleep, thinking about the race tomorrow.",
            "locomo:conv-a:D10:1",
        ),
        ("2024-01-01T12:30:00", "Cleo", "Happy new year from the library!", "locomo:conv-b:D1:1"),
        ("2024-01-01T12:30:30", "Dev", "You're working today?", "locomo:conv-b:D1:2"),
    ]
    assert [e.line for e in events] == list(range(1, 9))
    assert {e.kind for e in events} == {"utterance"} and {e.origin for e in events} == {str(LOCOMO)}
    assert events[2].payload["meta"] == {
        "sample_id": "conv-a",
        "session": 1,
        "dia_id": "D1:3",
        "session_date_time": "1:56 pm on 8 May, 2023",
        "img_url": ["https://example.org/bowl.jpg"],
    }
    assert events[5].payload["meta"] == {
        "sample_id": "conv-a",
        "session": 10,
        "dia_id": "D10:1",
        "session_date_time": "12:09 am on 13 September, 2023",
    }


def test_locomo_user_picks_one_sample() -> None:
    events = list(read_events(LOCOMO, "locomo", user="conv-b"))
    assert [e.source for e in events] == ["locomo:conv-b:D1:1", "locomo:conv-b:D1:2"]
    assert [e.line for e in events] == [1, 2]
    with pytest.raises(EventError) as info:
        list(read_events(LOCOMO, "locomo", user="conv-z"))
    assert (
        str(info.value) == f"{LOCOMO}: no sample_id 'conv-z' in this file; it holds conv-a, conv-b"
    )


def test_locomo_samples_and_questions() -> None:
    assert locomo_samples(LOCOMO) == ["conv-a", "conv-b"]
    questions = locomo_questions(LOCOMO)
    assert [(q["sample_id"], q["index"]) for q in questions] == [
        ("conv-a", 0),
        ("conv-a", 1),
        ("conv-a", 2),
        ("conv-b", 0),
    ]
    assert questions[1]["answer"] == "2021"
    assert questions[2] == {
        "sample_id": "conv-a",
        "index": 2,
        "question": "What did Ben name his cat?",
        "answer": None,
        "adversarial_answer": "Miso",
        "category": 5,
        "evidence": ["D1:3"],
    }


def locomo_one(tmp_path: Path, date_time: Any, name: str = "one.json") -> Path:
    sample = {
        "sample_id": "x",
        "conversation": {
            "speaker_a": "A",
            "speaker_b": "B",
            "session_1_date_time": date_time,
            "session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "hi"}],
        },
    }
    return dump(tmp_path / name, [sample])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56)),
        ("10:04 am on 16 November, 2022", datetime(2022, 11, 16, 10, 4)),
        ("12:09 am on 13 September, 2023", datetime(2023, 9, 13, 0, 9)),
        ("12:30 pm on 1 January, 2024", datetime(2024, 1, 1, 12, 30)),
        ("9:05 PM on 3 Sept 2023", datetime(2023, 9, 3, 21, 5)),
        (" 7:00 a.m. on 29 feb, 2024 ", datetime(2024, 2, 29, 7, 0)),
    ],
)
def test_locomo_date_formats(tmp_path: Path, text: str, expected: datetime) -> None:
    [event] = read_events(locomo_one(tmp_path, text), "locomo")
    assert event.ts == expected


@pytest.mark.parametrize(
    "text",
    [
        "13:56 pm on 8 May, 2023",
        "1:56 pm on 31 February, 2023",
        "8 May, 2023",
        "1:56 pm on 8 Mai, 2023",
        5,
    ],
)
def test_locomo_bad_date_names_the_session(tmp_path: Path, text: Any) -> None:
    path = locomo_one(tmp_path, text)
    assert error_text(path, "locomo") == (
        f"{path}: conversation 1 (sample_id 'x'): session_1: field 'session_1_date_time': "
        f"cannot read {text!r} as a date and time like '1:56 pm on 8 May, 2023'"
    )


def set_text(data: Any) -> None:
    data[0]["conversation"]["session_2"][1]["text"] = 7


def drop_speaker(data: Any) -> None:
    del data[1]["conversation"]["session_1"][0]["speaker"]


def repeat_dia_id(data: Any) -> None:
    data[0]["conversation"]["session_10"][0]["dia_id"] = "D2:1"


def session_not_list(data: Any) -> None:
    data[0]["conversation"]["session_10"] = {"speaker": "Ben"}


def no_date(data: Any) -> None:
    del data[0]["conversation"]["session_2_date_time"]


def repeat_sample(data: Any) -> None:
    data[1]["sample_id"] = "conv-a"


def no_conversation(data: Any) -> None:
    del data[1]["conversation"]


def caption_not_text(data: Any) -> None:
    data[0]["conversation"]["session_1"][2]["blip_caption"] = ["a bowl"]


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            set_text,
            "conversation 1 (sample_id 'conv-a'): session_2: turn 2: field 'text': must be a string",
        ),
        (
            drop_speaker,
            "conversation 2 (sample_id 'conv-b'): session_1: turn 1: field 'speaker': must be a non-empty string",
        ),
        (
            repeat_dia_id,
            "conversation 1 (sample_id 'conv-a'): session_10: turn 1: field 'dia_id': repeats a dia_id of session_2 turn 1",
        ),
        (
            session_not_list,
            "conversation 1 (sample_id 'conv-a'): session_10: field 'session_10': must be a list of turns",
        ),
        (
            no_date,
            "conversation 1 (sample_id 'conv-a'): session_2: field 'session_2_date_time': cannot read None as a date and time like '1:56 pm on 8 May, 2023'",
        ),
        (
            repeat_sample,
            "conversation 2: field 'sample_id': sample_id 'conv-a' appears twice in the file",
        ),
        (
            no_conversation,
            "conversation 2 (sample_id 'conv-b'): field 'conversation': must be a JSON object of speakers and sessions",
        ),
        (
            caption_not_text,
            "conversation 1 (sample_id 'conv-a'): session_1: turn 3: field 'blip_caption': must be a string",
        ),
    ],
)
def test_locomo_errors_name_file_position_and_field(
    tmp_path: Path, mutate: Callable[[Any], None], expected: str
) -> None:
    data = copy.deepcopy(load(LOCOMO))
    mutate(data)
    path = dump(tmp_path / "locomo10.json", data)
    assert error_text(path, "locomo") == f"{path}: {expected}"


def test_locomo_file_level_errors(tmp_path: Path) -> None:
    path = dump(tmp_path / "obj.json", {"sample_id": "x"})
    assert error_text(path, "locomo") == (
        f"{path}: expected a JSON list of LoCoMo samples, got a dict"
    )
    broken = tmp_path / "broken.json"
    broken.write_text('[\n  {"sample_id": "x",\n  }\n]')
    assert error_text(broken, "locomo") == (
        f"{broken}:2: invalid JSON (trailing comma is not allowed at column 20)"
    )
    missing = tmp_path / "missing.json"
    assert error_text(missing, "locomo") == (
        f"{missing}: cannot read the file: No such file or directory; check the path"
    )


def test_real_locomo_file_parses_every_conversation() -> None:
    if not REAL_LOCOMO.exists():
        pytest.skip("the shared LoCoMo file is not on this machine")
    data = json.loads(REAL_LOCOMO.read_text())
    expected_turns: dict[str, int] = {}
    expected_sessions: dict[str, int] = {}
    for sample in data:
        conv = sample["conversation"]
        sessions = [k for k in conv if re.fullmatch(r"session_\d+", k)]
        turns = sum(len(conv[k]) for k in sessions)
        assert sessions and turns > 0, sample["sample_id"]
        expected_turns[sample["sample_id"]] = turns
        expected_sessions[sample["sample_id"]] = len(sessions)
    assert len(expected_turns) == 10
    assert locomo_samples(REAL_LOCOMO) == list(expected_turns)

    events = list(read_events(REAL_LOCOMO))
    assert len(events) == sum(expected_turns.values())
    histories = {str(key): batch for key, batch in read_histories(REAL_LOCOMO)}
    assert {k: len(v) for k, v in histories.items()} == expected_turns
    for sid, batch in histories.items():
        assert all(a.ts < b.ts for a, b in pairwise(batch)), sid
        assert len({e.payload["meta"]["session"] for e in batch}) == expected_sessions[sid]
    assert len({e.source for e in events}) == len(events)
    assert len(locomo_questions(REAL_LOCOMO)) == sum(len(s["qa"]) for s in data)


# -- LongMemEval ---------------------------------------------------------------------------


def test_longmemeval_turns_dates_sources_and_meta() -> None:
    events = list(read_events(LONGMEMEVAL, "longmemeval"))
    assert rows(events) == [
        ("2023-05-20T02:21:00", "user", "How do I boil an egg?", "longmemeval:q-001:sharegpt_x1:0"),
        (
            "2023-05-20T02:21:30",
            "assistant",
            "Simmer it for nine minutes.",
            "longmemeval:q-001:sharegpt_x1:1",
        ),
        (
            "2023-05-22T18:05:00",
            "user",
            "My beagle keeps chewing shoes.",
            "longmemeval:q-001:answer_q001_1:0",
        ),
        (
            "2023-05-22T18:05:30",
            "assistant",
            "Try giving him chew toys.",
            "longmemeval:q-001:answer_q001_1:1",
        ),
        ("2023-05-22T18:06:00", "user", "Thanks!", "longmemeval:q-001:answer_q001_1:2"),
        ("2023-06-30T08:00:00", "user", "Recommend a podcast.", "longmemeval:q-002_abs:filler_7:0"),
        # A session id repeated within one record (as in LongMemEval-S) keeps both copies.
        (
            "2023-07-01T08:00:00",
            "user",
            "Recommend a podcast.",
            "longmemeval:q-002_abs:filler_7#2:0",
        ),
    ]
    metas = [e.payload["meta"] for e in events]
    assert metas[0] == {
        "question_id": "q-001",
        "session_id": "sharegpt_x1",
        "session": 0,
        "turn": 0,
    }
    assert metas[2]["has_answer"] is True and metas[3]["has_answer"] is False
    assert "has_answer" not in metas[4]
    assert metas[6] == {
        "question_id": "q-002_abs",
        "session_id": "filler_7",
        "session": 1,
        "turn": 0,
        "occurrence": 2,
    }


def test_longmemeval_user_and_questions() -> None:
    events = list(read_events(LONGMEMEVAL, "longmemeval", user="q-002_abs"))
    assert [e.source for e in events] == [
        "longmemeval:q-002_abs:filler_7:0",
        "longmemeval:q-002_abs:filler_7#2:0",
    ]
    with pytest.raises(
        EventError, match="no question_id 'q-9' in this file; it holds q-001, q-002_abs"
    ):
        list(read_events(LONGMEMEVAL, "longmemeval", user="q-9"))
    assert longmemeval_questions(LONGMEMEVAL) == [
        {
            "question_id": "q-001",
            "question_type": "single-session-user",
            "question": "What breed is my dog?",
            "answer": "A beagle",
            "question_date": "2023/06/01 (Thu) 09:30",
            "ts": "2023-06-01T09:30:00",
            "answer_session_ids": ["answer_q001_1"],
            "abstention": False,
        },
        {
            "question_id": "q-002_abs",
            "question_type": "multi-session",
            "question": "How many cats do I have?",
            "answer": "0",
            "question_date": "2023/07/04 (Tue) 12:00",
            "ts": "2023-07-04T12:00:00",
            "answer_session_ids": [],
            "abstention": True,
        },
    ]


def bad_role(data: Any) -> None:
    data[0]["haystack_sessions"][1][2]["role"] = "human"


def bad_content(data: Any) -> None:
    data[0]["haystack_sessions"][0][1]["content"] = None


def bad_lme_date(data: Any) -> None:
    data[1]["haystack_dates"][1] = "July 1st"


def short_dates(data: Any) -> None:
    data[0]["haystack_dates"].pop()


def bad_has_answer(data: Any) -> None:
    data[0]["haystack_sessions"][1][0]["has_answer"] = "yes"


def no_question_id(data: Any) -> None:
    del data[1]["question_id"]


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            bad_role,
            "record 1 (question_id 'q-001'): session 2 (id 'answer_q001_1'): turn 3: field 'role': must be 'user' or 'assistant', got 'human'",
        ),
        (
            bad_content,
            "record 1 (question_id 'q-001'): session 1 (id 'sharegpt_x1'): turn 2: field 'content': must be a string",
        ),
        (
            bad_lme_date,
            "record 2 (question_id 'q-002_abs'): session 2 (id 'filler_7'): field 'haystack_dates[1]': cannot read 'July 1st' as a date like '2023/05/20 (Sat) 02:21'",
        ),
        (
            short_dates,
            "record 1 (question_id 'q-001'): field 'haystack_sessions': haystack_session_ids, haystack_dates and haystack_sessions must be equally long (got 2, 1, 2)",
        ),
        (
            bad_has_answer,
            "record 1 (question_id 'q-001'): session 2 (id 'answer_q001_1'): turn 1: field 'has_answer': must be true or false",
        ),
        (no_question_id, "record 2: field 'question_id': must be a non-empty string"),
    ],
)
def test_longmemeval_errors_name_file_position_and_field(
    tmp_path: Path, mutate: Callable[[Any], None], expected: str
) -> None:
    data = copy.deepcopy(load(LONGMEMEVAL))
    mutate(data)
    path = dump(tmp_path / "longmemeval_s.json", data)
    assert error_text(path, "longmemeval") == f"{path}: {expected}"


# -- chat ----------------------------------------------------------------------------------


def test_chat_json_list_of_messages() -> None:
    path = FIXTURES / "chat_list.json"
    events = list(read_events(path, "chat"))
    assert rows(events) == [
        ("2025-03-02T10:15:00", "user", "I just moved to Lisbon.", "chat:chat_list:0:1"),
        ("2025-03-02T10:15:01", "assistant", "Welcome to Lisbon!", "chat:chat_list:0:2"),
        ("2025-03-02T10:30:00", "user", "This is my new street:\n[image]", "chat:chat_list:0:3"),
    ]
    assert events[0].payload["meta"] == {"conversation": "0", "message": 1, "role": "user"}


def test_chat_json_object_with_conversation_time() -> None:
    events = list(read_events(FIXTURES / "chat_object.json", "chat"))
    # The tool call (content null) and the tool result are skipped; the last message has its own time.
    assert rows(events) == [
        (
            "2025-03-02T08:55:00",
            "user",
            "Book me a flight to Tokyo for March 10.",
            "chat:chat_object:trip-planning:0",
        ),
        (
            "2025-03-02T08:55:01",
            "assistant",
            "NH 204 leaves at 11:05.",
            "chat:chat_object:trip-planning:3",
        ),
        ("2025-03-02T09:00:00", "user", "Great, take it.", "chat:chat_object:trip-planning:4"),
    ]
    assert events[2].payload["meta"] == {
        "conversation": "trip-planning",
        "message": 4,
        "role": "user",
        "name": "sam",
    }


def test_chat_jsonl_of_messages() -> None:
    events = list(read_events(FIXTURES / "chat_messages.jsonl", "chat"))
    assert rows(events) == [
        ("2025-04-01T08:00:00", "user", "I'm allergic to peanuts.", "chat:chat_messages:0:0"),
        (
            "2025-04-01T08:00:01",
            "assistant",
            "Noted.\nI'll remember that.",
            "chat:chat_messages:0:2",
        ),
    ]


def test_chat_jsonl_of_conversations() -> None:
    events = list(read_events(FIXTURES / "chat_conversations.jsonl", "chat"))
    assert rows(events) == [
        (
            "2025-05-01T12:00:00",
            "user",
            "My passport expires in June.",
            "chat:chat_conversations:c1:0",
        ),
        ("2025-05-01T12:00:01", "assistant", "Renew it soon.", "chat:chat_conversations:c1:1"),
        ("2025-05-04T07:30:00", "user", "I run on Sundays.", "chat:chat_conversations:7:0"),
        ("2025-05-05T20:00:00", "user", "Untitled chat.", "chat:chat_conversations:2:0"),
    ]


def test_chat_json_list_of_conversations(tmp_path: Path) -> None:
    path = dump(
        tmp_path / "export.json",
        [
            {"id": "a", "ts": 0, "messages": [{"role": "user", "content": "one"}]},
            {"messages": [{"role": "user", "content": "two", "ts": "2025-01-01"}]},
        ],
    )
    assert rows(list(read_events(path))) == [
        ("1970-01-01T00:00:00", "user", "one", "chat:export:a:0"),
        ("2025-01-01T00:00:00", "user", "two", "chat:export:1:0"),
    ]


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        (
            "no_ts.json",
            [{"role": "user", "content": "hi"}],
            ": message 1: field 'ts': no time: give the message (or its conversation) a 'ts', ISO 8601 or unix seconds; uac does not invent times",
        ),
        (
            "role.json",
            [{"role": "human", "content": "hi", "ts": 1}],
            ": message 1: field 'role': unknown role 'human'; use 'user' or 'assistant' (system, developer, tool, function messages are skipped)",
        ),
        (
            "ms.json",
            {"id": "c", "ts": 1740905700000, "messages": []},
            " (id 'c'): field 'ts': 1740905700000 is out of range for unix seconds (milliseconds? divide by 1000)",
        ),
        (
            "content.json",
            {"id": "c", "ts": 1, "messages": [{"role": "user", "content": 5}]},
            " (id 'c'): message 1: field 'content': must be a string or a list of content parts",
        ),
        (
            "part.json",
            {"ts": 1, "messages": [{"role": "user", "content": [{"type": "text", "text": 3}]}]},
            ": message 1: field 'content[0].text': must be a string",
        ),
        (
            "when.json",
            {"ts": "yesterday", "messages": []},
            ": field 'ts': 'yesterday' is neither an ISO 8601 date-time nor unix seconds",
        ),
        (
            "ids.json",
            [{"id": "x", "ts": 1, "messages": []}, {"id": "x", "ts": 1, "messages": []}],
            ": conversation 2: field 'id': conversation id 'x' appears twice in the file",
        ),
        (
            "index_id.json",
            [{"ts": 1, "messages": []}, {"id": 0, "ts": 1, "messages": []}],
            ": conversation 2: field 'id': conversation id '0' appears twice in the file",
        ),
    ],
)
def test_chat_json_errors(tmp_path: Path, name: str, content: Any, expected: str) -> None:
    path = tmp_path / name
    path.write_text(json.dumps(content, indent=1))  # pretty-printed: a JSON document, not JSONL
    assert error_text(path, "chat") == f"{path}{expected}"


def test_chat_jsonl_errors(tmp_path: Path) -> None:
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text('{"role": "user", "content": "a", "ts": 1}\n{"messages": []}\n')
    assert error_text(mixed) == (
        f"{mixed}:2: a conversation object in a file of single messages; keep one shape a file"
    )
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"role": "user", "content": "a", "ts": 1}\n{"role": \n')
    assert error_text(broken, "chat").startswith(f"{broken}:2: invalid JSON (")
    untimed = tmp_path / "untimed.jsonl"
    untimed.write_text('{"id": "c9", "messages": [{"role": "user", "content": "a"}]}\n')
    assert error_text(untimed).startswith(f"{untimed}:1 (id 'c9'): message 1: field 'ts': no time")


def test_chat_text_from_parts_and_skipped_roles(tmp_path: Path) -> None:
    path = dump(
        tmp_path / "parts.json",
        {
            "ts": "2025-06-01T10:00:00+02:00",
            "messages": [
                {"role": "system", "content": 42},
                {
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": "What is this?"},
                        {"type": "input_image", "image_url": "data:..."},
                        {"type": "input_audio", "input_audio": {}},
                    ],
                },
                {"role": "function", "name": "f", "content": "{}"},
                {"role": "assistant", "content": ""},
            ],
        },
    )
    assert rows(list(read_events(path))) == [
        ("2025-06-01T08:00:00", "user", "What is this?\n[image]\n[input_audio]", "chat:parts:0:1"),
        ("2025-06-01T08:00:01", "assistant", "", "chat:parts:0:3"),
    ]


# -- detection, dispatch, histories ----------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("locomo_mini.json", "locomo"),
        ("longmemeval_mini.json", "longmemeval"),
        ("chat_list.json", "chat"),
        ("chat_object.json", "chat"),
        ("chat_messages.jsonl", "chat"),
        ("chat_conversations.jsonl", "chat"),
    ],
)
def test_detect_format_of_fixtures(name: str, fmt: str) -> None:
    assert detect_format(FIXTURES / name) == fmt


def test_detect_format_by_content_and_unknown(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    events.write_text(
        '{"kind": "utterance", "ts": "2025-03-02T10:15:00", "speaker": "user", "text": "hi"}\n'
    )
    assert detect_format(events) == "jsonl"
    for text in ("", '{"kind": "fact", "ts": \n'):  # empty or broken: Event JSONL's reader says why
        (tmp_path / "odd.jsonl").write_text(text)
        assert detect_format(tmp_path / "odd.jsonl") == "jsonl"
    misnamed = tmp_path / "events.txt"
    misnamed.write_text(events.read_text())
    assert detect_format(misnamed) == "jsonl"
    one_line = dump(
        tmp_path / "one.json", {"ts": 1, "messages": [{"role": "user", "content": "x"}]}
    )
    assert detect_format(one_line) == "chat"
    assert [e.source for e in read_events(one_line)] == ["chat:one:0:0"]
    csv = tmp_path / "table.csv"
    csv.write_text("a,b\n1,2\n")
    with pytest.raises(EventError) as info:
        detect_format(csv)
    assert str(info.value) == (
        f"{csv}: cannot tell the format from the name and first bytes; name it: one of "
        + ", ".join(FORMATS)
    )


def test_read_events_jsonl_and_argument_errors(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text(
        '{"kind": "utterance", "ts": "2025-03-02T10:15:00", "speaker": "user", "text": "hi", "source": "s1"}\n'
    )
    [event] = read_events(path)
    assert (event.source, event.payload["text"]) == ("s1", "hi")
    with pytest.raises(EventError, match=r"unknown format 'csv'; use one of jsonl, locomo"):
        read_events(path, "csv")
    with pytest.raises(EventError, match="a chat file is one history, so user= does not apply"):
        read_events(FIXTURES / "chat_list.json", user="me")


def test_read_histories_groups_by_user() -> None:
    histories = list(read_histories(LOCOMO))
    assert [(key, len(batch)) for key, batch in histories] == [("conv-a", 6), ("conv-b", 2)]
    lme = list(read_histories(LONGMEMEVAL))
    assert [(key, len(batch)) for key, batch in lme] == [("q-001", 5), ("q-002_abs", 2)]
    [(key, batch)] = read_histories(FIXTURES / "chat_conversations.jsonl")
    assert key is None and len(batch) == 4


def test_ingest_into_a_workbench_is_idempotent(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    with Workbench(db, user="conv-a") as wb:
        report = wb.append_parsed(list(read_events(LOCOMO, "locomo", user="conv-a")))
        assert (report.appended, report.skipped) == (6, 0)
        again = wb.append_parsed(list(read_events(LOCOMO, "locomo", user="conv-a")))
        assert (again.appended, again.skipped) == (0, 6)
    with Workbench(db, user="conv-a") as wb:
        assert wb.append_parsed(list(read_events(LOCOMO, "locomo", user="conv-a"))).appended == 0
        logged = list(wb.store.events("conv-a"))
    assert [e.source for e in logged] == [
        f"locomo:conv-a:{d}" for d in ("D1:1", "D1:2", "D1:3", "D2:1", "D2:2", "D10:1")
    ]
    assert logged[2].payload["meta"]["img_url"] == ["https://example.org/bowl.jpg"]
