"""Conversations of other kinds, and the bundled sample, labelled for what a reader expects.

Three conversations written for the offline summarizer's benchmark (a
coding-help chat, an offsite-planning chat, a home-internet support chat),
in the voice people use in chat: questions, thanks, "Ask Mei" and "Hmm" at
the start of sentences, first-person statements, decisions said in many
ways. Each carries labels beside its facts:

* ``decided``: the decisions taken, each as terms that must all appear in
  one item of ``key_decisions``;
* ``names``: every name of a person, product, place or organisation in the
  text (an extracted entity is right when it is one of them, or a part of
  one: "Daniel" of "Daniel Okafor").

:data:`SAMPLE` is the bundled sample conversation (what ``make run`` loads)
with the same labels.
"""

from __future__ import annotations

import json
from importlib import resources

from benchmarks.conversations import Conversation, _f

CODING_HELP = Conversation(
    name="coding-help",
    turns=(
        (
            "user",
            "Hey! Quick one. I'm Ravi, the only backend dev at Brightleaf, and I'm moving our "
            "invoicing service from Flask to FastAPI.",
        ),
        (
            "assistant",
            "Hi Ravi! Happy to help. What does the service do today, and what is pushing the move?",
        ),
        (
            "user",
            "It exposes about 40 endpoints, mostly CRUD over Postgres with SQLAlchemy 1.4. We "
            "want async and automatic OpenAPI docs. Can FastAPI reuse our SQLAlchemy models?",
        ),
        (
            "assistant",
            "Yes. FastAPI doesn't care about the ORM, so your SQLAlchemy models can stay. For "
            "async you would move to SQLAlchemy 2.0 with the asyncio extension and asyncpg; the "
            "models need little change, but the session handling does.",
        ),
        ("user", "Hmm, how long would the session rewrite take for 40 endpoints?"),
        (
            "assistant",
            "With a shared dependency that yields an AsyncSession, most endpoints change by a "
            "few lines. Budget two to three days for the endpoints and another day for tests.",
        ),
        (
            "user",
            "Ok. Let's do it in two steps then: first port to FastAPI with sync SQLAlchemy, then "
            "switch to async in a second release.",
        ),
        (
            "assistant",
            "That's the safer plan: the first step changes the web layer only, the second the "
            "data layer. Which Python version are you on?",
        ),
        ("user", "Python 3.9 on production, but our CI already runs 3.12."),
        (
            "assistant",
            "FastAPI works on both, but SQLAlchemy 2.0 typing and some Pydantic v2 features are "
            "nicer on 3.10 and later. Upgrading production to 3.12 first would remove a class of "
            "surprises.",
        ),
        (
            "user",
            "Ask Mei about that, she owns the servers. Actually I'll ask her myself. Mei Huang "
            "runs infra.",
        ),
        ("assistant", "Sounds good. Once Mei confirms, the upgrade can happen before the port."),
        (
            "user",
            "She says 3.12 on production is fine, the upgrade is scheduled for Tuesday May 6.",
        ),
        (
            "assistant",
            "Great, then you can target 3.12 only. For validation, Pydantic v2 is the default "
            "with current FastAPI.",
        ),
        (
            "user",
            "I prefer Pydantic v2 anyway, the v1 validators drove me crazy. What about auth? We "
            "use Flask-Login with cookies.",
        ),
        (
            "assistant",
            "FastAPI has no Flask-Login equivalent built in. Common choices are fastapi-users, "
            "or your own dependency that reads the session cookie and loads the user. Since you "
            "keep cookies, a small dependency is usually simplest.",
        ),
        (
            "user",
            "We decided: keep cookie sessions, write our own dependency, no fastapi-users. Fewer "
            "moving parts.",
        ),
        (
            "assistant",
            "Own dependency with cookie sessions, no fastapi-users. I can sketch it if you want.",
        ),
        (
            "user",
            "Yes please, later. Deadline for the sync port is May 30, and the async release "
            "should follow in June.",
        ),
        (
            "assistant",
            "Noted: sync FastAPI port by May 30, async SQLAlchemy release in June. Do you deploy "
            "with Docker?",
        ),
        ("user", "Yes, on Fly.io. Gunicorn with 4 workers today."),
        (
            "assistant",
            "Then switch to Gunicorn with Uvicorn workers (uvicorn.workers.UvicornWorker), "
            "keeping 4 workers to start, and watch memory since async workers hold more "
            "connections.",
        ),
        ("user", "Perfect, thanks a lot!"),
        ("assistant", "You're welcome, Ravi. Good luck with the port!"),
    ),
    facts=(
        _f("who", "Ravi"),
        _f("company", "Brightleaf"),
        _f("migration", "Flask", "FastAPI"),
        _f("size", "40 endpoints"),
        _f("orm", "SQLAlchemy"),
        _f("two steps", "sync", "async"),
        _f("infra owner", "Mei Huang"),
        _f("python upgrade", "3.12", "May 6"),
        _f("validation", "Pydantic v2"),
        _f("auth", "cookie"),
        _f("deadline", "May 30"),
        _f("async release", "June"),
        _f("hosting", "Fly.io"),
    ),
    decided=(
        _f("two-step port", "FastAPI", "sync", "async"),
        _f("own auth dependency", "cookie", "fastapi-users"),
    ),
    names=(
        "Ravi",
        "Brightleaf",
        "Flask",
        "FastAPI",
        "Postgres",
        "SQLAlchemy",
        "OpenAPI",
        "asyncpg",
        "AsyncSession",
        "Python",
        "Pydantic",
        "Mei Huang",
        "Flask-Login",
        "fastapi-users",
        "Docker",
        "Fly.io",
        "Gunicorn",
        "Uvicorn",
        "UvicornWorker",
    ),
)

OFFSITE_PLANNING = Conversation(
    name="offsite-planning",
    turns=(
        (
            "user",
            "Good morning! I need to organise our team offsite for the design team, 14 people, "
            "sometime in late September.",
        ),
        (
            "assistant",
            "Morning! Happy to help. Do you have a region in mind, and a budget per person?",
        ),
        (
            "user",
            "Somewhere within two hours of Berlin by train. Budget is about 450 euros per "
            "person for two nights, everything included.",
        ),
        (
            "assistant",
            "Within two hours of Berlin by train, good options are Leipzig, Dresden, the "
            "Spreewald and the Baltic coast around Rostock. Leipzig and Dresden have the most "
            "venues with workshop rooms.",
        ),
        ("user", "The Spreewald sounds lovely. Is there anywhere there with a big workshop room?"),
        (
            "assistant",
            "Schloss Lübbenau has meeting rooms for up to 40 people, and the Spreewald Resort in "
            "Burg has a large barn they rent for workshops. Both are about 80 minutes from "
            "Berlin Hauptbahnhof by regional train.",
        ),
        ("user", "Hmm, what do they cost?"),
        (
            "assistant",
            "Rough autumn prices: Schloss Lübbenau about 160 euros per room per night with "
            "breakfast, the Spreewald Resort about 130 euros. The resort adds around 600 euros "
            "per day for the barn.",
        ),
        (
            "user",
            "Ok let's go with the Spreewald Resort in Burg, September 24 to 26. Lena Vogt from "
            "our office will call them tomorrow to hold 14 rooms.",
        ),
        (
            "assistant",
            "Spreewald Resort in Burg, September 24 to 26, 14 rooms, Lena Vogt calling "
            "tomorrow. Do you want me to plan the agenda too?",
        ),
        (
            "user",
            "Yes, but keep it light. Mornings for workshops, afternoons free. One evening we "
            "want a boat tour, the Spreewald is famous for them.",
        ),
        (
            "assistant",
            "A draft: day one arrival by noon, lunch, a kickoff workshop, dinner. Day two "
            "workshops until 1 pm, then a punt boat tour through the canals and a barbecue. Day "
            "three a retrospective in the morning and departure after lunch.",
        ),
        (
            "user",
            "Love it. Two people are vegan and one has a nut allergy, the resort needs to know "
            "that.",
        ),
        (
            "assistant",
            "I'll add a dietary note for Lena's call: two vegan guests and one nut allergy.",
        ),
        (
            "user",
            "Also my manager Jonas Weber has to approve anything over 6,000 euros total. 14 "
            "times 450 is 6,300 so I need his sign-off.",
        ),
        (
            "assistant",
            "Right, 6,300 euros is above his limit. Send Jonas Weber the venue, dates and a cost "
            "breakdown; an approval usually goes faster with the agenda attached.",
        ),
        ("user", "Jonas approved it this afternoon. Final budget 6,300 euros."),
        (
            "assistant",
            "Great news. Approved: 6,300 euros, venue Spreewald Resort, September 24 to 26.",
        ),
        ("user", "What's the best way to get there, all together?"),
        (
            "assistant",
            "The RE2 regional train from Berlin Hauptbahnhof to Lübbenau takes about 80 "
            "minutes; from there the resort's shuttle or two taxis cover the last 15 minutes. A "
            "group ticket is cheaper than individual tickets.",
        ),
        (
            "user",
            "We'll take the 9:35 RE2 on the 24th. I'm buying the group tickets next week.",
        ),
        (
            "assistant",
            "9:35 RE2 on September 24, group tickets bought next week. Anything else?",
        ),
        ("user", "No, that's it for now. Thank you!"),
        ("assistant", "Enjoy the offsite planning!"),
    ),
    facts=(
        _f("group", "14 people"),
        _f("near", "Berlin"),
        _f("budget per person", "450 euros"),
        _f("venue", "Spreewald Resort", "Burg"),
        _f("dates", "September 24"),
        _f("booking call", "Lena Vogt"),
        _f("boat tour", "boat tour"),
        _f("diet", "vegan", "nut allergy"),
        _f("approver", "Jonas Weber"),
        _f("approved budget", "6,300"),
        _f("train", "9:35", "RE2"),
        _f("tickets", "group tickets"),
    ),
    decided=(
        _f("venue and dates", "Spreewald Resort", "September 24"),
        _f("budget approved", "6,300"),
        _f("train", "9:35", "RE2"),
    ),
    names=(
        "Berlin",
        "Leipzig",
        "Dresden",
        "Spreewald",
        "Baltic",
        "Rostock",
        "Schloss Lübbenau",
        "Lübbenau",
        "Spreewald Resort",
        "Burg",
        "Berlin Hauptbahnhof",
        "Lena Vogt",
        "Jonas Weber",
        "RE2",
    ),
)

INTERNET_SUPPORT = Conversation(
    name="internet-support",
    turns=(
        ("user", "hi, my internet has been dropping every evening since Saturday"),
        (
            "assistant",
            "Sorry to hear that. Could you give me your account number or the address of the "
            "connection?",
        ),
        ("user", "account 7781-204, 12 Harbour Street, Cork"),
        (
            "assistant",
            "Thanks. I can see a fibre connection on the 500 Mbps plan at 12 Harbour Street. "
            "The line logs show 9 disconnections since Saturday, all between 7 pm and 11 pm. Is "
            "the router a Nokia G-240W?",
        ),
        ("user", "yes that's the one, the white box. It's in the hallway."),
        (
            "assistant",
            "The evening pattern and the router's logs point to Wi-Fi interference or an "
            "overheating router rather than the fibre line: the line itself stayed up. Does the "
            "router feel hot, and is it in a closed cabinet?",
        ),
        ("user", "it's in a cupboard with the door closed, and it is quite warm"),
        (
            "assistant",
            "Please try moving it out of the cupboard, or leaving the door open, for two "
            "evenings. If the drops continue, we'll replace the router or send a technician.",
        ),
        (
            "user",
            "I already tried that last week, same thing. And I work from home, so I need this "
            "fixed quickly. My calls with clients are in the evenings because they're in "
            "Vancouver.",
        ),
        (
            "assistant",
            "Understood. Since you already tried ventilation, I'm booking a technician visit. "
            "The earliest slot is Thursday 14 March between 8 am and 12 noon. Does that work?",
        ),
        ("user", "Thursday morning works. My partner Aoife will be home, I'll be at the office."),
        (
            "assistant",
            "Booked: technician visit on Thursday 14 March, 8 am to 12 noon, Aoife will let them "
            "in. The technician will bring a replacement router.",
        ),
        ("user", "Great. Will I get a refund for the days it's been down?"),
        (
            "assistant",
            "Yes: the service credit for repeated disconnections is 5 euros per affected day. "
            "Saturday to today is 5 days, so 25 euros will be credited to your next bill.",
        ),
        (
            "user",
            "Ok fine. Please send updates by text to 087 555 0142, not email, I never check that "
            "inbox.",
        ),
        ("assistant", "Noted: updates by text to 087 555 0142, no email."),
        ("user", "Thanks, bye"),
        ("assistant", "Goodbye, and sorry again for the trouble."),
    ),
    facts=(
        _f("account", "7781-204"),
        _f("address", "Harbour Street", "Cork"),
        _f("plan", "500 Mbps"),
        _f("symptom", "9 disconnections"),
        _f("router", "G-240W"),
        _f("ventilation tried", "cupboard"),
        _f("works from home", "home"),
        _f("visit", "technician", "14 March"),
        _f("who lets them in", "Aoife"),
        _f("credit", "25 euros"),
        _f("contact", "087 555 0142"),
    ),
    decided=(_f("technician visit", "technician", "14 March"),),
    names=(
        "Harbour Street",
        "Cork",
        "Nokia",
        "Nokia G-240W",
        "Wi-Fi",
        "Vancouver",
        "Aoife",
    ),
)

WRITTEN: tuple[Conversation, ...] = (CODING_HELP, OFFSITE_PLANNING, INTERNET_SUPPORT)


def _sample_turns() -> tuple[tuple[str, str], ...]:
    """The bundled sample as (role, text), tool calls left out (they carry no text)."""
    raw = resources.files("engram").joinpath("data", "sample_conversation.jsonl").read_text()
    turns = []
    for line in raw.splitlines():
        row = json.loads(line) if line.strip() else {}
        if row.get("content"):
            turns.append((str(row["role"]), str(row["content"])))
    return tuple(turns)


#: The sample conversation of ``make run`` (a week of launch planning), labelled.
SAMPLE = Conversation(
    name="sample",
    turns=_sample_turns(),
    facts=(
        _f("product", "Phoenix"),
        _f("predecessor", "Lumen Tasks"),
        _f("launch date", "April 8"),
        _f("launch owner", "Maya"),
        _f("engineering", "Daniel Okafor"),
        _f("marketing", "Priya Raman"),
        _f("finance", "Tom Becker"),
        _f("freeze", "March 21"),
        _f("pro price", "$14", "$17"),
        _f("business price", "$32", "$38"),
        _f("waitlist discount", "30%"),
        _f("price lock", "$8", "12 months"),
        _f("trial", "14-day"),
        _f("sso checkpoint", "March 14"),
        _f("product hunt", "April 9"),
        _f("signup goal", "7,000"),
        _f("on-call", "Amara Diallo"),
        _f("pricing page", "phoenix.lumenlabs.io/pricing"),
    ),
    decided=(
        _f("sso checkpoint", "March 14", "SSO"),
        _f("blog post", "blog post", "March 26"),
        _f("no price test", "price test"),
        _f("free tier", "Free", "3 projects", "5 members"),
        _f("pro price", "Pro", "$14", "$17"),
        _f("business price", "Business", "$32", "$38"),
        _f("waitlist discount", "30%", "waitlist"),
        _f("price lock", "$8", "12 months"),
        _f("annual discount", "10%", "first year"),
        _f("business trial", "14-day", "no card"),
        _f("pricing review", "review", "April 22"),
        _f("referral program", "referral", "Loops"),
        _f("product hunt day", "Product Hunt", "April 9"),
        _f("trial with sso", "SSO", "30 days"),
        _f("newsletter", "Northwind", "April 8"),
        _f("sso go", "SSO", "Azure", "nested"),
        _f("signup goal kept", "5,000"),
        _f("signup goal", "7,000"),
        _f("timeline view beta", "timeline view", "beta"),
        _f("freeze exception", "exception", "March 26"),
        _f("on-call", "Pacific", "Europe"),
        _f("rollback owner", "rollback", "Maya"),
        _f("support training", "training", "March 24"),
        _f("support readiness", "Jonas Lindqvist", "support"),
    ),
    names=(
        "Maya",
        "Phoenix",
        "Lumen Tasks",
        "Lumen Labs",
        "Daniel Okafor",
        "Priya Raman",
        "Tom Becker",
        "Slack",
        "Stripe",
        "Okta",
        "Google",
        "Google Workspace",
        "Azure AD",
        "Microsoft",
        "TaskForge",
        "Planwise",
        "Sofia",
        "Loops",
        "Viral Loops",
        "Product Hunt",
        "LinkedIn",
        "X",
        "Jonas Lindqvist",
        "Amara Diallo",
        "Amara Nwosu",
        "Northwind Partners",
        "Pacific",
        "Europe",
        # The plans are names of products too.
        "Pro",
        "Business",
        "Free",
    ),
)
