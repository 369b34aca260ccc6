"""A seeded generator of long multi-session conversations for the memory-quality suite.

Each conversation belongs to one user and spans several sessions of user/assistant turns. Most
turns are small talk and task chatter (distractors, some naming other people's cities, pets and
employers); a few plant facts about the user (name, city, employer, pet, manager, ids,
preferences). Later sessions update some facts (a move, a new job, a changed preference), which
supersedes the earlier statement. Questions at the end name their evidence messages, and each
evidence message carries the answer string that must reach the prompt.

The questions are built to tell retrieval methods apart:

* ``fact`` / ``update``: paraphrased — a question shares no content word with its evidence
  ("Which company pays my salary?" for "I work at Orchard Robotics"), so lexical overlap alone
  does not find it; ``update`` questions also carry the superseded values (``stale_keys``).
* keyword distractors: for every fact, a message about someone else that *does* share the
  question's keywords ("My friend's boss is strict about deadlines." for "Who is my boss?").
* ``multi``: two independent facts in one question (two evidence items).
* ``multi-hop``: two facts that only answer together — one names a bridge ("my sister", "my
  oldest friend from university"), the other links it to the answer ("My sister moved to Cork").
* ``temporal``: an event told with a date relative to the message ("three days ago", "last
  weekend"); the question asks when it happened. The evidence key is the relative phrase;
  ``Question.answer`` holds the absolute date, computed from the message's timestamp.

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
    """``fact`` (stated once), ``update`` (the latest of several values), ``multi`` (two facts),
    ``multi-hop`` (two facts that answer only together), ``temporal`` (when something happened)."""
    evidence: list[Evidence]
    stale_keys: list[str] = field(default_factory=list)
    """Superseded values of an updated fact (reported when they reach the prompt alone)."""
    answer: str | None = None
    """The expected answer where it is not an evidence key (temporal: the ISO date)."""


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
    """Paraphrased: no content word in common with any statement or update."""
    distractor: str
    """About someone else, sharing the question's keywords (never an answer string)."""
    updates: list[str] = field(default_factory=list)


SLOTS: dict[str, _Slot] = {
    "name": _Slot("name", ["Hi! I'm {v}, nice to meet you.", "By the way, my name is {v}.", "Oh and you can call me {v}."],
                  "How should you address me?",
                  "How should I address a letter to a company abroad, with the name first or last?"),
    "city": _Slot("city", ["I live in {v} with my partner.", "It's raining again here in {v}, where I live.", "We rent a flat in {v}, it's where I live."],
                  "Which town is my current residence?",
                  "My cousin's current residence is a tiny town up in the hills, no shops at all.",
                  ["Big news: we moved, I live in {v} now.", "Update for you: I relocated to {v} last month, so that's home now."]),
    "employer": _Slot("employer", ["I work at {v} as a data engineer.", "My employer is {v}, mostly backend work."],
                      "Which company pays my salary?",
                      "My uncle says the company that pays his salary is always late with it.",
                      ["I switched jobs, I'm at {v} now.", "Started a new job this week: I work at {v} now."]),
    "pet": _Slot("pet", ["My dog is called {v}.", "Sorry, {v}, my dog, needed a walk."], "What did I name my puppy?",
                 "My neighbour can't decide what to name her new puppy, she keeps asking everyone."),
    "drink": _Slot("drink", ["I prefer {v} in the morning, coffee makes me jittery.", "I like {v} in the morning, it's my ritual."],
                   "Which beverage do I have at breakfast?",
                   "My brother claims the only sensible beverage at breakfast is plain water.",
                   ["These days I prefer {v} in the morning instead.", "I've changed my mind, I like {v} best in the morning now."]),
    "manager": _Slot("manager", ["My manager is {v}, she is very supportive.", "I report to {v}, my manager."], "Who is my boss?",
                     "My friend's boss is terribly strict about deadlines, poor thing."),
    "sync": _Slot("sync", ["My weekly sync with my manager is on {v}.", "The team sync is every {v} morning."],
                  "When is my regular check-in meeting?",
                  "My partner's regular check-in meeting always runs over time.",
                  ["Heads up: the weekly sync moved to {v}."]),
    "order": _Slot("order", ["My order {v} arrived damaged, the box was crushed.", "Order {v} came broken, I want a replacement."],
                   "Which purchase showed up in bad shape?",
                   "A purchase my colleague made online showed up in bad shape too, the shop refused to help."),
    "ticket": _Slot("ticket", ["The support ticket for the login problem is {v}.", "They gave me ticket number {v} for the login issue."],
                    "What reference did the helpdesk assign to my sign-in trouble?",
                    "The helpdesk at my gym took a week to assign anyone to their sign-in trouble."),
    "allergy": _Slot("allergy", ["Just so you know, I'm allergic to {v}.", "Please remember I'm allergic to {v}."],
                     "What must I avoid because of an immune reaction?",
                     "My nephew must avoid dairy because of an immune reaction, so birthday cakes are tricky."),
    "contact": _Slot("contact", ["Please always message me on {v}, I don't check email.", "From now on, contact me on {v}."],
                     "Which app should you use to reach me?",
                     "Which app do people use to reach a plumber at short notice?",
                     ["Change of plan: contact me on {v} from now on."]),
}
MULTI = [
    (("manager", "sync"), "Who is my boss, and when is my regular check-in meeting?"),
    (("pet", "city"), "What did I name my puppy, and which town is my current residence?"),
    (("order", "ticket"), "Which purchase showed up in bad shape, and what reference did the helpdesk assign to my sign-in trouble?"),
]
FLIGHTS = [f"{a}{n}" for a in ("LX", "TP", "SK", "KL", "OS") for n in (412, 1187, 2290, 358, 904)]
GIFTS = ["hand-knitted scarf", "vintage compass", "ceramic teapot", "bonsai tree", "leather journal", "brass telescope"]


@dataclass
class _Hop:
    """Two facts that answer a question only together: ``bridge`` names the link, ``target`` the answer."""

    name: str
    bridge: str
    """Carries ``{k}`` (its own key)."""
    target: str
    """Carries ``{v}`` (the answer)."""
    question: str


HOPS = [
    _Hop("trip", "I finally booked flight {k} for next month to visit my sister.",
         "My sister moved to {v} in the spring, she loves it there.",
         "Which city am I travelling to next month?"),
    _Hop("gift", "My oldest friend from university sent me a {k} for my birthday.",
         "My oldest friend from university now lives in {v}, we rarely see each other.",
         "Where does the person who sent my birthday present live?"),
]
TEMPORAL_EVENTS = [
    ("passport", "I finally renewed my passport {r}, the photo is terrible.", "When did I renew my passport?"),
    ("ankle", "I sprained my ankle playing football {r}, still limping.", "When did I hurt my ankle?"),
    ("thesis", "I handed in my thesis draft {r} and I'm waiting for comments.", "When did I submit my thesis draft?"),
    ("towed", "My car got towed {r}, what a mess that was.", "When was my car towed?"),
]
RELATIVE_DATES = {  # phrase -> days before the message's date (None: computed)
    "three days ago": 3, "two weeks ago": 14, "ten days ago": 10, "the day before yesterday": 2,
    "five days ago": 5, "last weekend": None,
}


def resolve_relative(phrase: str, when: datetime) -> str:
    """The ISO date a relative phrase means, said at ``when`` ("last weekend": that Saturday)."""
    days = RELATIVE_DATES[phrase]
    if days is None:  # the Saturday of the last full weekend before ``when``
        days = (when.weekday() - 5) % 7 or 7
        if days < 2 and when.weekday() == 6:
            days += 7  # on a Sunday, "last weekend" is the previous one
    return (when - timedelta(days=days)).date().isoformat()


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


@dataclass
class _Plan:
    group: str
    """A slot name, ``hop:<name>``, ``temporal:<event>`` or ``noise``."""
    text: str
    key: str | None = None


def generate_conversation(  # noqa: C901 - one linear recipe
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
    # plan: facts and first hops in the first half, updates and second hops after them (second
    # half when there is room), then temporal events and keyword distractors where room is left;
    # positions are linear turn indexes. A short conversation drops hops and temporal events.
    total = sessions * turns_per_session
    if total < len(SLOTS) + 2 * len(update_values) + 2:
        raise ValueError(f"{sessions} sessions x {turns_per_session} turns is too short for {len(SLOTS)} facts and their updates")
    room = total - len(SLOTS) - len(update_values) - 2
    hops = HOPS[: min(len(HOPS), room // 2)]
    hop_keys = {"trip": rng.choice(FLIGHTS), "gift": rng.choice(GIFTS)}
    hop_values: dict[str, str] = {}
    for hop in hops:
        hop_values[hop.name] = next(v for v in values["city"] if v not in used)
        used.add(hop_values[hop.name])
    events = rng.sample(TEMPORAL_EVENTS, min(3, room - 2 * len(hops)))
    phrases = rng.sample(sorted(RELATIVE_DATES), len(events))
    others = [n for n in FIRST_NAMES if n not in used]
    half = max(len(SLOTS) + len(hops), total // 2)
    first = rng.sample(range(half), len(SLOTS) + len(hops))
    fact_pos, hop_pos = first[: len(SLOTS)], first[len(SLOTS):]
    plan: dict[int, _Plan] = {}
    for slot, pos in zip(SLOTS, fact_pos):
        plan[pos] = _Plan(slot, rng.choice(SLOTS[slot].statements).format(v=chosen[slot]), chosen[slot])

    def later(after: int) -> int:
        room = [p for p in range(max(after + 1, half), total) if p not in plan] or [p for p in range(after + 1, total) if p not in plan]
        return rng.choice(room)

    for slot, value in update_values.items():
        plan[later(fact_pos[list(SLOTS).index(slot)])] = _Plan(slot, rng.choice(SLOTS[slot].updates).format(v=value), value)
    for hop, pos in zip(hops, hop_pos):
        # the bridge or the target first, at random; the other one later
        a = _Plan(f"hop:{hop.name}:target", hop.target.format(v=hop_values[hop.name]), hop_values[hop.name])
        b = _Plan(f"hop:{hop.name}:bridge", hop.bridge.format(k=hop_keys[hop.name]), hop_keys[hop.name])
        a, b = (a, b) if rng.random() < 0.5 else (b, a)
        plan[pos] = a
        plan[later(pos)] = b
    free = [p for p in range(total) if p not in plan]
    for (event, template, _), phrase, pos in zip(events, phrases, rng.sample(free, len(events))):
        plan[pos] = _Plan(f"temporal:{event}", template.format(r=phrase), phrase)
    free = [p for p in range(total) if p not in plan]
    keyword_distractors = [SLOTS[s].distractor for s in SLOTS]
    for text, pos in zip(keyword_distractors, rng.sample(free, min(len(free) // 2, len(keyword_distractors)))):
        plan[pos] = _Plan("noise", text)
    distractor_values = {
        "city": [c for c in CITIES if c not in used],
        "pet": [p for p in PETS if p not in used],
        "employer": [e for e in EMPLOYERS if e not in used],
        "drink": [d for d in DRINKS if d not in used],
        "allergy": [a for a in ALLERGIES if a not in used],
        "weekday": [w for w in WEEKDAYS if w not in used] or ["Saturday"],
    }
    evidence_of: dict[str, list[tuple[str, str]]] = {}
    when_of: dict[str, datetime] = {}
    out_sessions: list[list[Message]] = []
    counter = 0
    for s in range(sessions):
        session_msgs: list[Message] = []
        t = start + timedelta(days=3 * s)
        topic, things = TOPICS[rng.randrange(len(TOPICS))]
        for turn in range(turns_per_session):
            keys: list[str] = []
            planned = plan.get(s * turns_per_session + turn)
            if planned is not None:
                text = planned.text
                keys = [planned.key] if planned.key else []
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
            if planned is not None and planned.key:
                evidence_of.setdefault(planned.group, []).append((uid, planned.key))
                when_of[uid] = t
            t += timedelta(minutes=1)
            reply = rng.choice(ASSISTANT_FILLERS).format(thing=rng.choice(things))
            session_msgs.append(Message(f"c{index}-m{counter:04d}", s, "assistant", reply, t))
            counter += 1
            t += timedelta(minutes=1)
        out_sessions.append(session_msgs)
    questions: list[Question] = []
    for slot, spec in SLOTS.items():
        items = evidence_of.get(slot, [])
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
        if evidence_of.get(a) and evidence_of.get(b):
            ev = [Evidence(*evidence_of[a][-1]), Evidence(*evidence_of[b][-1])]
            questions.append(Question(f"c{index}-q-{a}+{b}", text, "multi", ev))
    for hop in hops:
        bridge, target = evidence_of[f"hop:{hop.name}:bridge"][-1], evidence_of[f"hop:{hop.name}:target"][-1]
        questions.append(Question(f"c{index}-q-hop-{hop.name}", hop.question, "multi-hop", [Evidence(*bridge), Evidence(*target)],
                                  answer=target[1]))
    for event, _, text in events:
        uid, phrase = evidence_of[f"temporal:{event}"][-1]
        questions.append(Question(f"c{index}-q-when-{event}", text, "temporal", [Evidence(uid, phrase)],
                                  answer=resolve_relative(phrase, when_of[uid])))
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
    for question in conv.questions:  # the card puts the question into the thread: it must not carry an answer
        for key in keys | {question.answer or ""} - {""}:
            if key_in_text(key, question.text):
                raise AssertionError(f"answer {key!r} leaks into question {question.question_id}: {question.text!r}")


def key_in_text(key: str, text: str) -> bool:
    """Whole-word, case-insensitive containment of an answer string."""
    return re.search(r"(?<!\w)" + re.escape(key.lower()) + r"(?!\w)", text.lower()) is not None


def generate_conversations(count: int, *, seed: int = 0, sessions: int = 8, turns_per_session: int = 20) -> list[Conversation]:
    """``count`` conversations, deterministic for ``seed``."""
    return [generate_conversation(i, seed=seed, sessions=sessions, turns_per_session=turns_per_session) for i in range(count)]
