"""A seeded generator of long multi-session conversations for the memory-quality suite.

Each conversation belongs to one user and spans several sessions of user/assistant turns. Most
turns are small talk and task chatter (distractors, some naming other people's cities, pets and
employers); a few plant facts about the user (name, city, employer, pet, manager, ids,
preferences). Later sessions update some facts (a move, a new job, a changed preference), which
supersedes the earlier statement. Questions at the end name their evidence messages, and each
evidence message carries the answer string that must reach the prompt.

Answer strings are unique within a conversation: no distractor, other fact or superseded value
contains them, so "the answer string is in the context" means "the evidence reached the prompt".
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone


@dataclass
class Message:
    """One turn. ``keys`` are the answer strings this message is evidence for."""

    message_id: str
    session: int
    role: str
    content: str
    timestamp: datetime
    keys: list[str] = field(default_factory=list)


@dataclass
class Evidence:
    """One piece of evidence a question needs: the message and the answer string in it."""

    message_id: str
    key: str


@dataclass
class Question:
    """A question asked after the last session, with the evidence it needs."""

    question_id: str
    text: str
    kind: str
    """``fact`` (stated once), ``update`` (the latest of several values), ``multi`` (two facts)."""
    evidence: list[Evidence]
    stale_keys: list[str] = field(default_factory=list)
    """Superseded values of an updated fact (reported when they reach the prompt alone)."""


@dataclass
class Conversation:
    """One user's sessions and the questions about them."""

    conversation_id: str
    user_id: str
    sessions: list[list[Message]]
    questions: list[Question]

    @property
    def messages(self) -> list[Message]:
        """All messages in order."""
        return [m for s in self.sessions for m in s]


FIRST_NAMES = [
    "Maya", "Bob", "Ines", "Tariq", "Priya", "Lukas", "Aiko", "Mateo", "Sione", "Farah", "Oskar", "Leilani",
    "Dmitri", "Anouk", "Kwame", "Ysolde", "Ravi", "Noor", "Henrik", "Catalina", "Emeka", "Saoirse", "Joaquin",
    "Ingrid", "Tomasz", "Amara", "Bartek", "Yuki", "Rafael", "Zofia",
]
CITIES = [
    "Lisbon", "Tallinn", "Porto", "Valencia", "Ljubljana", "Gdansk", "Bergen", "Leipzig", "Utrecht", "Bologna",
    "Antwerp", "Graz", "Tampere", "Aarhus", "Cork", "Bilbao", "Krakow", "Malmo", "Lyon", "Brno", "Turku",
    "Nantes", "Zagreb", "Basel",
]
EMPLOYERS = [
    "Northwind Logistics", "Bluepeak Analytics", "Orchard Robotics", "Kestrel Health", "Fjordline Energy",
    "Tidewater Foods", "Lumen Ledger", "Quarry Street Labs", "Cobalt Ferry", "Saffron Systems", "Brightwell Insurance",
    "Granite Owl Games", "Helix Harbor", "Marigold Payments", "Pinecrest Studios", "Vantage Rail",
]
PETS = [
    "Biscuit", "Pickles", "Noodle", "Juniper", "Waffles", "Pepper", "Mochi", "Tofu", "Ziggy", "Clementine",
    "Barnaby", "Sprocket", "Maple", "Gizmo", "Dumpling", "Olive",
]
DRINKS = ["oolong tea", "matcha", "rooibos", "yerba mate", "chai", "hot chocolate", "kombucha", "barley tea"]
ALLERGIES = ["peanuts", "shellfish", "sesame", "penicillin", "pollen from birch trees", "latex"]
CONTACTS = ["Signal", "Telegram", "WhatsApp", "Matrix"]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]
TOPICS = [
    ("cooking", ["risotto", "sourdough", "stock", "saffron", "knife", "oven", "glaze", "braise"]),
    ("travel", ["train", "itinerary", "hostel", "ferry", "museum", "layover", "passport", "luggage"]),
    ("code", ["regex", "unit test", "docker image", "migration", "stack trace", "null pointer", "refactor", "linter"]),
    ("fitness", ["interval run", "kettlebell", "stretching", "rest day", "protein", "sprint", "rowing"]),
    ("books", ["novel", "chapter", "audiobook", "library", "essay", "trilogy", "footnote"]),
    ("garden", ["tomatoes", "compost", "seedlings", "mulch", "pruning", "greenhouse", "aphids"]),
    ("finance", ["budget", "spreadsheet", "invoice template", "savings", "receipts", "tax form"]),
    ("music", ["chord", "metronome", "playlist", "vinyl", "bassline", "rehearsal"]),
]
ASSISTANT_FILLERS = [
    "That makes sense. A good approach is to break {thing} into smaller steps and check each one before moving on, "
    "so you can see quickly where things go wrong and fix them without redoing everything.",
    "Here is a suggestion for {thing}: start simple, write down what you expect to happen, and compare it with what "
    "actually happens. Most of the time the difference points straight at the problem.",
    "Good question about {thing}. There are a few options, each with trade-offs in time and effort; if you tell me "
    "which matters more to you right now, I can narrow it down to one recommendation.",
    "Thanks for the details on {thing}. I would keep notes as you go, because small observations tend to matter "
    "later, and it is much easier to spot patterns when they are written down in one place.",
    "For {thing}, a common mistake is trying to do everything at once. Pick the one part that blocks you most, solve "
    "that, and the rest usually becomes easier to plan.",
]
USER_FILLERS = [
    "I was thinking about {thing} again today, any tips?",
    "Quick question about {thing}: is it better to do it in the morning or the evening?",
    "I spent an hour on {thing} and I'm not sure it worked.",
    "Can you remind me what the usual steps for {thing} are?",
    "What do people usually get wrong with {thing}?",
    "I tried a new approach to {thing} and it went better than expected.",
    "Do you think {thing} is worth the effort for a beginner?",
]
# distractors: the same kinds of facts about other people (their values never collide with keys)
DISTRACTORS = [
    "My colleague {other} just moved to {city}, lucky them.",
    "My sister's dog is called {pet} and it is a nightmare on walks.",
    "A friend of mine works at {employer} and keeps complaining about the commute.",
    "My neighbour {other} swears by {drink} but I never tried it.",
    "{other} from the book club is allergic to {allergy}, so we changed the snacks.",
    "My cousin's ticket got stuck for weeks, she had a similar issue with her order.",
    "{other} told me the team sync at their company is on {weekday}s.",
]


@dataclass
class _Slot:
    name: str
    statements: list[str]
    question: str
    updates: list[str] = field(default_factory=list)


SLOTS: dict[str, _Slot] = {
    "name": _Slot("name", ["Hi! I'm {v}, nice to meet you.", "By the way, my name is {v}.", "Oh and you can call me {v}."],
                  "What is my name?"),
    "city": _Slot("city", ["I live in {v} with my partner.", "It's raining again here in {v}, where I live.", "We rent a flat in {v}, it's where I live."],
                  "Which city do I live in now?",
                  ["Big news: we moved, I live in {v} now.", "Update for you: I relocated to {v} last month, so that's home now."]),
    "employer": _Slot("employer", ["I work at {v} as a data engineer.", "My employer is {v}, mostly backend work."],
                      "Where do I work these days?",
                      ["I switched jobs, I'm at {v} now.", "Started a new job this week: I work at {v} now."]),
    "pet": _Slot("pet", ["My dog is called {v}.", "Sorry, {v}, my dog, needed a walk."], "What is my dog's name?"),
    "drink": _Slot("drink", ["I prefer {v} in the morning, coffee makes me jittery.", "I like {v} in the morning, it's my ritual."],
                   "What do I like to drink in the morning?",
                   ["These days I prefer {v} in the morning instead.", "I've changed my mind, I like {v} best in the morning now."]),
    "manager": _Slot("manager", ["My manager is {v}, she is very supportive.", "I report to {v}, my manager."], "Who is my manager?"),
    "sync": _Slot("sync", ["My weekly sync with my manager is on {v}.", "The team sync is every {v} morning."],
                  "On which day is my weekly sync?", ["Heads up: the weekly sync moved to {v}."]),
    "order": _Slot("order", ["My order {v} arrived damaged, the box was crushed.", "Order {v} came broken, I want a replacement."],
                   "Which order arrived damaged?"),
    "ticket": _Slot("ticket", ["The support ticket for the login problem is {v}.", "They gave me ticket number {v} for the login issue."],
                    "What is the ticket number of my login problem?"),
    "allergy": _Slot("allergy", ["Just so you know, I'm allergic to {v}.", "Please remember I'm allergic to {v}."],
                     "What am I allergic to?"),
    "contact": _Slot("contact", ["Please always message me on {v}, I don't check email.", "From now on, contact me on {v}."],
                     "How should you contact me?",
                     ["Change of plan: contact me on {v} from now on."]),
}
MULTI = [
    (("manager", "sync"), "Who is my manager and on which day is our weekly sync?"),
    (("pet", "city"), "What is my dog's name and which city do we live in now?"),
    (("order", "ticket"), "Which order arrived damaged, and what is my login ticket number?"),
]


def _values(rng: random.Random) -> dict[str, list[str]]:
    """Per slot: a shuffled pool of distinct values."""
    pools = {
        "name": FIRST_NAMES, "city": CITIES, "employer": EMPLOYERS, "pet": PETS, "drink": DRINKS,
        "manager": FIRST_NAMES, "sync": WEEKDAYS, "allergy": ALLERGIES, "contact": CONTACTS,
    }
    out = {k: rng.sample(v, len(v)) for k, v in pools.items()}
    out["order"] = [str(rng.randint(10000, 99999)) for _ in range(6)]
    out["ticket"] = [f"TCK-{rng.randint(100000, 999999)}" for _ in range(6)]
    return out


def generate_conversation(
    index: int, *, seed: int = 0, sessions: int = 8, turns_per_session: int = 20, start: datetime | None = None
) -> Conversation:
    """One conversation (deterministic for ``(index, seed)``); ``turns_per_session`` user/assistant pairs."""
    rng = random.Random(f"{seed}-{index}")
    start = start or datetime(2025, 3, 1, 9, 0, tzinfo=timezone.utc)
    values = _values(rng)
    used: set[str] = set()
    chosen: dict[str, str] = {}
    for slot in SLOTS:
        value = next(v for v in values[slot] if v not in used)
        chosen[slot] = value
        used.add(value)
    # the name and the manager come from the same pool; keep them distinct
    updated_slots = [s for s in SLOTS if SLOTS[s].updates]
    update_values: dict[str, str] = {}
    for slot in rng.sample(updated_slots, k=min(3, len(updated_slots))):
        value = next(v for v in values[slot] if v not in used)
        update_values[slot] = value
        used.add(value)
    others = [n for n in FIRST_NAMES if n not in used]
    # plan: facts in the first half of the conversation, updates after their fact (second half
    # when there is room); positions are linear turn indexes
    total = sessions * turns_per_session
    if total < len(SLOTS) + 2 * len(update_values) + 2:
        raise ValueError(f"{sessions} sessions x {turns_per_session} turns is too short for {len(SLOTS)} facts and their updates")
    half = max(len(SLOTS), total // 2)
    fact_pos = rng.sample(range(half), len(SLOTS))
    plan: dict[tuple[int, int], tuple[str, str, bool]] = {}
    taken = set(fact_pos)
    for slot, pos in zip(SLOTS, fact_pos):
        plan[divmod(pos, turns_per_session)] = (slot, chosen[slot], False)
    for slot, value in update_values.items():
        after = fact_pos[list(SLOTS).index(slot)]
        room = [p for p in range(max(after + 1, half), total) if p not in taken] or [p for p in range(after + 1, total) if p not in taken]
        pos = rng.choice(room)
        taken.add(pos)
        plan[divmod(pos, turns_per_session)] = (slot, value, True)
    distractor_values = {
        "city": [c for c in CITIES if c not in used],
        "pet": [p for p in PETS if p not in used],
        "employer": [e for e in EMPLOYERS if e not in used],
        "drink": [d for d in DRINKS if d not in used],
        "allergy": [a for a in ALLERGIES if a not in used],
        "weekday": [w for w in WEEKDAYS if w not in used] or ["Saturday"],
    }
    evidence_of: dict[str, list[tuple[str, str]]] = {s: [] for s in SLOTS}
    out_sessions: list[list[Message]] = []
    counter = 0
    for s in range(sessions):
        session_msgs: list[Message] = []
        t = start + timedelta(days=3 * s)
        topic, things = TOPICS[rng.randrange(len(TOPICS))]
        for turn in range(turns_per_session):
            keys: list[str] = []
            planned = plan.get((s, turn))
            if planned is not None:
                slot, value, is_update = planned
                templates = SLOTS[slot].updates if is_update else SLOTS[slot].statements
                text = rng.choice(templates).format(v=value)
                keys = [value]
            elif rng.random() < 0.12:
                text = rng.choice(DISTRACTORS).format(
                    other=rng.choice(others), city=rng.choice(distractor_values["city"]),
                    pet=rng.choice(distractor_values["pet"]), employer=rng.choice(distractor_values["employer"]),
                    drink=rng.choice(distractor_values["drink"]), allergy=rng.choice(distractor_values["allergy"]),
                    weekday=rng.choice(distractor_values["weekday"]),
                )
            else:
                text = rng.choice(USER_FILLERS).format(thing=rng.choice(things))
                if rng.random() < 0.3:
                    text += f" It's for my {topic} project."
            uid = f"c{index}-m{counter:04d}"
            counter += 1
            session_msgs.append(Message(uid, s, "user", text, t, keys))
            if planned is not None:
                evidence_of[planned[0]].append((uid, planned[1]))
            t += timedelta(minutes=1)
            reply = rng.choice(ASSISTANT_FILLERS).format(thing=rng.choice(things))
            session_msgs.append(Message(f"c{index}-m{counter:04d}", s, "assistant", reply, t))
            counter += 1
            t += timedelta(minutes=1)
        out_sessions.append(session_msgs)
    questions: list[Question] = []
    for slot, spec in SLOTS.items():
        items = evidence_of[slot]
        if not items:
            continue
        latest_id, latest_value = items[-1]
        questions.append(
            Question(
                question_id=f"c{index}-q-{slot}",
                text=spec.question,
                kind="update" if len(items) > 1 else "fact",
                evidence=[Evidence(latest_id, latest_value)],
                stale_keys=[v for _, v in items[:-1]],
            )
        )
    for (a, b), text in MULTI:
        if evidence_of[a] and evidence_of[b]:
            ev = [Evidence(*evidence_of[a][-1]), Evidence(*evidence_of[b][-1])]
            questions.append(Question(f"c{index}-q-{a}+{b}", text, "multi", ev))
    conv = Conversation(f"c{index}", f"user-c{index}", out_sessions, questions)
    _check_unique_keys(conv)
    return conv


def _check_unique_keys(conv: Conversation) -> None:
    """Every answer string occurs only in its own evidence message(s)."""
    keys = {e.key for q in conv.questions for e in q.evidence} | {k for q in conv.questions for k in q.stale_keys}
    owners = {e.key: e.message_id for q in conv.questions for e in q.evidence}
    for msg in conv.messages:
        for key in keys:
            if key_in_text(key, msg.content) and owners.get(key, msg.message_id) != msg.message_id and key not in msg.keys:
                raise AssertionError(f"answer {key!r} leaks into {msg.message_id}: {msg.content!r}")


def key_in_text(key: str, text: str) -> bool:
    """Whole-word, case-insensitive containment of an answer string."""
    return re.search(r"(?<!\w)" + re.escape(key.lower()) + r"(?!\w)", text.lower()) is not None


def generate_conversations(count: int, *, seed: int = 0, sessions: int = 8, turns_per_session: int = 20) -> list[Conversation]:
    """``count`` conversations, deterministic for ``seed``."""
    return [generate_conversation(i, seed=seed, sessions=sessions, turns_per_session=turns_per_session) for i in range(count)]
