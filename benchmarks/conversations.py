"""A fixed set of conversations for the offline summary benchmark, with the facts a reader needs.

Each conversation is what a user of a chat app, a writing assistant or a
support bot says on an ordinary day: names repeated across turns, long
sentences, decisions with two halves, pleasantries. Each :class:`Fact` is
one thing someone taking over the conversation would need, written as the
terms that must all appear (case-insensitively) in what compaction keeps:
the summary plus the important data.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Fact:
    """One thing a reader needs; kept when every term appears in the kept text."""

    what: str
    terms: tuple[str, ...]


@dataclass(frozen=True)
class Conversation:
    """A conversation (role, text) and the facts it holds."""

    name: str
    turns: tuple[tuple[str, str], ...]
    facts: tuple[Fact, ...]
    #: Decisions the user states, each a whole sentence that must survive whole.
    decisions: tuple[str, ...] = ()
    #: Decisions taken, each as terms that must all appear in one item of ``key_decisions``.
    decided: tuple[Fact, ...] = ()
    #: Names of people, products, places and organisations said in the conversation.
    names: tuple[str, ...] = ()


def _f(what: str, *terms: str) -> Fact:
    return Fact(what, terms)


CONVERSATIONS: tuple[Conversation, ...] = (
    Conversation(
        name="project-kickoff",
        turns=(
            ("user", "Hi! I'm starting the Phoenix project with Bob Chen and Maria Lopez."),
            (
                "assistant",
                "Great, happy to help with Phoenix. What would you like to plan first, the "
                "timeline or the team roles?",
            ),
            (
                "user",
                "Bob Chen owns the backend and Maria Lopez owns the mobile app. Bob Chen "
                "will also review every database change.",
            ),
            (
                "assistant",
                "Noted: Bob Chen on backend and database reviews, Maria Lopez on mobile.",
            ),
            (
                "user",
                "We decided to launch the beta on March 3 and the public release on April 14, "
                "because the marketing campaign starts that week.",
            ),
            (
                "assistant",
                "Beta on March 3, public release on April 14, aligned with the marketing "
                "campaign. Do you want milestones between them?",
            ),
            (
                "user",
                "Yes. The budget is $48,000 for the whole quarter, and remember that the "
                "client, Acme Corp, must approve any spend above $5,000.",
            ),
            (
                "assistant",
                "Understood: a $48,000 quarterly budget, and Acme Corp approves anything "
                "above $5,000. I suggest a design freeze on February 10.",
            ),
            ("user", "Sounds good, the design freeze is February 10."),
            ("assistant", "Added the February 10 design freeze to the plan."),
            ("user", "I prefer weekly status reports on Fridays, in bullet points."),
            ("assistant", "Weekly status reports every Friday, in bullet points. Anything else?"),
            ("user", "Thanks, that's all for today!"),
            ("assistant", "You're welcome. Good luck with the Phoenix kickoff!"),
        ),
        facts=(
            _f("project name", "Phoenix"),
            _f("backend owner", "Bob Chen", "backend"),
            _f("mobile owner", "Maria Lopez", "mobile"),
            _f("beta date", "March 3"),
            _f("release date", "April 14"),
            _f("budget", "$48,000"),
            _f("approval rule", "Acme", "$5,000"),
            _f("design freeze", "February 10"),
            _f("report preference", "Friday", "bullet"),
        ),
        decisions=(
            "We decided to launch the beta on March 3 and the public release on April 14, "
            "because the marketing campaign starts that week.",
        ),
        names=("Phoenix", "Bob Chen", "Maria Lopez", "Acme Corp"),
    ),
    Conversation(
        name="database-choice",
        turns=(
            (
                "user",
                "Our app stores about 2 million orders a year and we need full-text search over "
                "customer notes. Which database should we use?",
            ),
            (
                "assistant",
                "PostgreSQL fits well: it handles that volume easily, and its tsvector full-text "
                "search with a GIN index covers the customer notes. SQLite would also work for "
                "a single server, but concurrent writes from several app servers favour "
                "PostgreSQL.",
            ),
            (
                "user",
                "We run three app servers behind a load balancer, so concurrent writes matter.",
            ),
            (
                "assistant",
                "Then PostgreSQL is the better choice; use a connection pool such as PgBouncer "
                "in transaction mode.",
            ),
            (
                "user",
                "Okay. We've decided to go with PostgreSQL 16 and PgBouncer, and Priya Natarajan "
                "will run the migration from MySQL over the weekend of June 8.",
            ),
            (
                "assistant",
                "PostgreSQL 16 with PgBouncer, with Priya Natarajan migrating from MySQL on the "
                "weekend of June 8. Should I draft a migration checklist?",
            ),
            ("user", "Yes please. Important: the orders table must keep its integer ids."),
            (
                "assistant",
                "Checklist: 1) dump the schema, 2) convert AUTO_INCREMENT to identity columns "
                "keeping the existing integer ids, 3) copy data with pgloader, 4) rebuild "
                "indexes, 5) switch the app servers one by one.",
            ),
            ("user", "Priya Natarajan asked whether pgloader keeps the ids. Does it?"),
            (
                "assistant",
                "Yes, pgloader copies the id values as they are; reset each identity sequence "
                "to the maximum id afterwards.",
            ),
            ("user", "Perfect, thank you so much."),
            ("assistant", "Glad to help. Good luck with the migration on June 8!"),
        ),
        facts=(
            _f("database chosen", "PostgreSQL 16"),
            _f("pooler", "PgBouncer"),
            _f("migration owner", "Priya Natarajan"),
            _f("migration date", "June 8"),
            _f("migrating from", "MySQL"),
            _f("ids constraint", "integer ids"),
            _f("scale", "2 million"),
            _f("three app servers", "three app servers"),
            _f("tool", "pgloader"),
        ),
        decisions=(
            "We've decided to go with PostgreSQL 16 and PgBouncer, and Priya Natarajan will run "
            "the migration from MySQL over the weekend of June 8.",
        ),
        names=("PostgreSQL", "SQLite", "PgBouncer", "Priya Natarajan", "MySQL", "pgloader"),
    ),
    Conversation(
        name="essay-writing",
        turns=(
            (
                "user",
                "I'm writing an essay on urban heat islands for my environmental science class. "
                "It should be 2,000 words, in APA style.",
            ),
            (
                "assistant",
                "A good structure would be Introduction, Causes, Health Effects, Mitigation and "
                "Conclusion. Shall I outline each section?",
            ),
            (
                "user",
                "The sections are Introduction, Causes, Health Effects, Mitigation and "
                "Conclusion. I like a formal tone and I want short paragraphs.",
            ),
            (
                "assistant",
                "Formal tone, short paragraphs. For Causes: dark surfaces absorb heat, there is "
                "little vegetation, and waste heat comes from cars and air conditioners.",
            ),
            (
                "user",
                "The key finding is that cities can be up to 7 degrees Celsius warmer than the "
                "surrounding countryside at night. Source: https://www.epa.gov/heatislands",
            ),
            (
                "assistant",
                "Good source. The EPA also reports that green roofs lower roof surface "
                "temperatures by up to 30 degrees Celsius.",
            ),
            (
                "user",
                "Let's go with green roofs and cool pavements as the two mitigation examples, "
                "and drop the tree-planting paragraph because Professor Alvarez said it was "
                "overdone.",
            ),
            (
                "assistant",
                "Mitigation will cover green roofs and cool pavements; the tree-planting "
                "paragraph goes, as Professor Alvarez suggested.",
            ),
            ("user", "The essay is due on November 22. Thanks, that's all."),
            ("assistant", "Due November 22. Good luck with the essay!"),
        ),
        facts=(
            _f("topic", "urban heat island"),
            _f("length", "2,000 words"),
            _f("style", "APA"),
            _f("sections", "Introduction", "Causes", "Health Effects", "Mitigation", "Conclusion"),
            _f("tone", "formal"),
            _f("key finding", "7 degrees"),
            _f("source", "epa.gov/heatislands"),
            _f("mitigation choice", "green roofs", "cool pavements"),
            _f("dropped paragraph", "tree-planting"),
            _f("professor", "Alvarez"),
            _f("due date", "November 22"),
        ),
        decisions=(
            "Let's go with green roofs and cool pavements as the two mitigation examples, and "
            "drop the tree-planting paragraph because Professor Alvarez said it was overdone.",
        ),
        names=("APA", "EPA", "Professor Alvarez"),
    ),
    Conversation(
        name="support-ticket",
        turns=(
            (
                "user",
                "Hello, my invoices stopped syncing to QuickBooks yesterday. My account is "
                "ACME-4471.",
            ),
            (
                "assistant",
                "Sorry about that. Can you tell me the last invoice number that synced?",
            ),
            ("user", "The last one was INV-20931, on Tuesday at 4 pm."),
            (
                "assistant",
                "Thanks. The QuickBooks token for ACME-4471 expired on Tuesday at 4:05 pm, which "
                "stops the sync. Reconnecting QuickBooks under Settings, Integrations renews it.",
            ),
            ("user", "Okay, I reconnected it. Will the missing invoices sync by themselves?"),
            (
                "assistant",
                "Yes: after a reconnect the 14 invoices created since INV-20931 sync within an "
                "hour. If any is missing after that, use Resync on the invoice.",
            ),
            (
                "user",
                "Great. Please always email me at dana@acme.example rather than calling, I'm "
                "in meetings most of the day.",
            ),
            ("assistant", "Noted: email dana@acme.example, no calls."),
            ("user", "Thanks, that's all!"),
            ("assistant", "You're welcome, Dana. Have a good day!"),
        ),
        facts=(
            _f("account", "ACME-4471"),
            _f("integration", "QuickBooks"),
            _f("last synced invoice", "INV-20931"),
            _f("cause", "token", "expired"),
            _f("fix", "reconnect"),
            _f("missing count", "14 invoices"),
            _f("contact preference", "dana@acme.example"),
        ),
        names=("QuickBooks", "Dana"),
    ),
    Conversation(
        name="trip-planning",
        turns=(
            (
                "user",
                "I'm planning a trip to Lisbon with my partner Sam from September 12 to "
                "September 19.",
            ),
            (
                "assistant",
                "Lisbon in September is lovely. Do you want help with the hotel, the day trips "
                "or restaurants?",
            ),
            (
                "user",
                "Hotel first. Our budget is 180 euros a night, and I'd prefer somewhere in "
                "Alfama or Chiado because we don't want to rely on taxis.",
            ),
            (
                "assistant",
                "In Chiado, Hotel do Chiado and the Lisboa Carmo Hotel usually stay under 180 "
                "euros in September; in Alfama, Memmo Alfama is a little above.",
            ),
            (
                "user",
                "We agreed on the Lisboa Carmo Hotel for all seven nights, and Sam will book it "
                "tonight with the free cancellation rate.",
            ),
            (
                "assistant",
                "Lisboa Carmo Hotel, seven nights, free cancellation, booked by Sam tonight. "
                "For day trips, Sintra is the classic one.",
            ),
            (
                "user",
                "Sam is vegetarian, so restaurants must have vegetarian mains. A day trip to "
                "Sintra on September 15 would be nice.",
            ),
            (
                "assistant",
                "Sintra on September 15: take the train from Rossio, about 40 minutes. For "
                "vegetarian food, Ao 26 Vegan Food Project is near Chiado.",
            ),
            ("user", "Lovely, thanks!"),
            ("assistant", "Enjoy Lisbon!"),
        ),
        facts=(
            _f("destination", "Lisbon"),
            _f("companion", "Sam"),
            _f("dates", "September 12", "September 19"),
            _f("budget", "180 euros"),
            _f("hotel chosen", "Lisboa Carmo"),
            _f("booking", "free cancellation"),
            _f("diet", "vegetarian"),
            _f("day trip", "Sintra", "September 15"),
            _f("train", "Rossio"),
        ),
        decisions=(
            "We agreed on the Lisboa Carmo Hotel for all seven nights, and Sam will book it "
            "tonight with the free cancellation rate.",
        ),
        names=(
            "Lisbon",
            "Sam",
            "Alfama",
            "Chiado",
            "Hotel do Chiado",
            "Lisboa Carmo Hotel",
            "Memmo Alfama",
            "Sintra",
            "Rossio",
            "Ao 26 Vegan Food Project",
        ),
    ),
    Conversation(
        name="bug-hunt",
        turns=(
            (
                "user",
                "Our checkout service returns HTTP 502 about once every 200 requests since we "
                "upgraded to Node 20 last Monday.",
            ),
            (
                "assistant",
                "Intermittent 502s after a Node upgrade often come from keep-alive timeouts: "
                "Node 20's server keepAliveTimeout is 5 seconds, and if the load balancer keeps "
                "idle connections longer, it reuses sockets Node already closed.",
            ),
            ("user", "Our AWS load balancer has an idle timeout of 60 seconds."),
            (
                "assistant",
                "That matches. Set server.keepAliveTimeout to 65 seconds and headersTimeout to "
                "66 seconds, so Node outlives the load balancer's idle timeout.",
            ),
            (
                "user",
                "We decided to set keepAliveTimeout to 65000 and headersTimeout to 66000, and "
                "Kenji Watanabe will deploy it to staging on Thursday before production.",
            ),
            (
                "assistant",
                "keepAliveTimeout 65000 and headersTimeout 66000, deployed by Kenji Watanabe to "
                "staging on Thursday. Watch the 502 rate for a day before production.",
            ),
            (
                "user",
                "Note that the payments team needs a heads-up before any production deploy, "
                "their on-call is Lena Fischer.",
            ),
            ("assistant", "Noted: tell Lena Fischer of the payments team before production."),
            ("user", "Thanks, that's all."),
            ("assistant", "Good luck with the fix!"),
        ),
        facts=(
            _f("symptom", "502"),
            _f("trigger", "Node 20"),
            _f("load balancer timeout", "60 seconds"),
            _f("fix keepalive", "keepAliveTimeout", "65"),
            _f("fix headers", "headersTimeout", "66"),
            _f("deployer", "Kenji Watanabe"),
            _f("staging day", "staging", "Thursday"),
            _f("payments contact", "Lena Fischer"),
        ),
        decisions=(
            "We decided to set keepAliveTimeout to 65000 and headersTimeout to 66000, and Kenji "
            "Watanabe will deploy it to staging on Thursday before production.",
        ),
        names=("Node", "AWS", "Kenji Watanabe", "Lena Fischer"),
    ),
    Conversation(
        name="meeting-notes",
        turns=(
            (
                "user",
                "Here are my notes from this morning's sync, can you keep track of them?\n"
                "Attendees\nBob Chen\nMaria Lopez\nPriya Natarajan\n"
                "Action items\nBob Chen fixes the login timeout by Wednesday\n"
                "Maria Lopez ships iOS build 4.2 to TestFlight\n"
                "Priya Natarajan writes the incident report for the March 2 outage",
            ),
            (
                "assistant",
                "Got it. Bob Chen: login timeout by Wednesday. Maria Lopez: iOS build 4.2 to "
                "TestFlight. Priya Natarajan: incident report for the March 2 outage.",
            ),
            (
                "user",
                "After comparing the three vendors on price, support hours and the effort of "
                "moving our existing customer records, we decided to sign the two-year contract "
                "with Zendesk at $19 per agent per month starting on July 1, and to cancel "
                "Freshdesk when its trial ends on June 30.",
            ),
            (
                "assistant",
                "Zendesk, two years, $19 per agent per month from July 1; Freshdesk cancelled "
                "at the end of its trial on June 30.",
            ),
            (
                "user",
                "Bob Chen also said the login timeout only happens for users who signed up "
                "with Google before 2023, which narrows it down a lot, and he thinks the old "
                "OAuth refresh tokens are the culprit because they were issued without the "
                "offline_access scope that the new session code expects.",
            ),
            (
                "assistant",
                "That fits: tokens without offline_access cannot be refreshed, so those "
                "sessions time out. Re-consenting those users would fix it.",
            ),
            ("user", "Ok great. Thanks, that's all."),
            ("assistant", "You're welcome!"),
        ),
        facts=(
            _f("attendee", "Priya Natarajan"),
            _f("login owner", "Bob Chen", "login timeout", "Wednesday"),
            _f("ios build", "4.2", "TestFlight"),
            _f("incident report", "incident report", "March 2"),
            _f("vendor", "Zendesk"),
            _f("price", "$19 per agent"),
            _f("start", "July 1"),
            _f("cancel", "Freshdesk"),
            _f("trial end", "June 30"),
            _f("affected users", "Google", "2023"),
            _f("cause", "offline_access"),
        ),
        decisions=(
            "After comparing the three vendors on price, support hours and the effort of moving "
            "our existing customer records, we decided to sign the two-year contract with "
            "Zendesk at $19 per agent per month starting on July 1, and to cancel Freshdesk when "
            "its trial ends on June 30.",
        ),
        names=(
            "Bob Chen",
            "Maria Lopez",
            "Priya Natarajan",
            "TestFlight",
            "Zendesk",
            "Freshdesk",
            "Google",
            "OAuth",
        ),
    ),
    Conversation(
        name="long-onboarding",
        turns=tuple(
            turn
            for day, (fact, answer) in enumerate(
                (
                    (
                        "My name is Aiko Tanaka and I joined the data team at Northwind on Monday.",
                        "Welcome to Northwind, Aiko! How can I help you get started?",
                    ),
                    (
                        "My manager is Carlos Mendes and our team owns the revenue dashboard.",
                        "Carlos Mendes and the revenue dashboard, noted.",
                    ),
                    (
                        "The dashboard reads from the warehouse table finance.daily_revenue, "
                        "refreshed every night at 2 am UTC.",
                        "So the data is at most a day old; the 2 am UTC refresh matters.",
                    ),
                    (
                        "Can you explain what a slowly changing dimension is?",
                        "A slowly changing dimension keeps the history of attributes that "
                        "change rarely, such as a customer's region; type 2 adds a new row "
                        "per change with validity dates.",
                    ),
                    (
                        "Our customers table is a type 2 dimension with valid_from and "
                        "valid_to columns.",
                        "Then join on the customer key and the date between valid_from and "
                        "valid_to.",
                    ),
                    (
                        "How do I write that join in SQL?",
                        "JOIN customers c ON c.customer_key = o.customer_key AND o.order_date "
                        ">= c.valid_from AND o.order_date < c.valid_to.",
                    ),
                    (
                        "I prefer SQL examples in lowercase with leading commas.",
                        "Lowercase SQL with leading commas from now on.",
                    ),
                    (
                        "We decided that the dashboard will switch from Tableau to Metabase at "
                        "the end of the quarter to save on licences.",
                        "Tableau to Metabase at the end of the quarter, for licence costs.",
                    ),
                    (
                        "My first task is to add a churn chart by region, due on the 28th.",
                        "A churn-by-region chart due on the 28th. Do you have a churn definition?",
                    ),
                    (
                        "Churn means no order for 90 days.",
                        "Churn: no order in the last 90 days. Count customers whose latest "
                        "order is older than that.",
                    ),
                    ("Thanks!", "Anytime."),
                    (
                        "Oh, and the warehouse is Snowflake, account nw-prod.",
                        "Snowflake, account nw-prod. Noted.",
                    ),
                )
            )
            for turn in (("user", fact), ("assistant", answer))
        ),
        facts=(
            _f("name", "Aiko Tanaka"),
            _f("company", "Northwind"),
            _f("manager", "Carlos Mendes"),
            _f("owns", "revenue dashboard"),
            _f("table", "finance.daily_revenue"),
            _f("refresh", "2 am"),
            _f("dimension", "type 2", "valid_from"),
            _f("sql style", "lowercase", "leading commas"),
            _f("migration", "Metabase"),
            _f("task", "churn", "region", "28th"),
            _f("churn definition", "90 days"),
            _f("warehouse", "Snowflake", "nw-prod"),
        ),
        decisions=(
            "We decided that the dashboard will switch from Tableau to Metabase at the end of "
            "the quarter to save on licences.",
        ),
        names=("Aiko Tanaka", "Northwind", "Carlos Mendes", "Tableau", "Metabase", "Snowflake"),
    ),
)

#: Pleasantries that carry no fact; a memory or summary that keeps them wastes its words.
FILLER = (
    "thanks, that's all",
    "thank you so much",
    "that's all for today",
    "you're welcome",
    "good luck",
    "lovely, thanks",
    "sounds good",
    "have a good day",
    "perfect, thank you",
    "ok great",
    "hi",
    "thanks",
    "thank you",
    "anytime",
    "noted",
    "you're welcome",
    "okay",
    "ok",
    "good morning",
    "morning",
    "hello",
    "hey",
    "bye",
    "goodbye",
    "wish me luck",
    "good catch",
    "good point",
    "great week",
    "great news",
    "good day",
    "have a good weekend",
    "have a good review",
    "sorry to hear that",
    "sorry about that",
    "happy to help",
    "glad to help",
    "love it",
    "perfect",
    "great",
    "fine",
    "wow",
    "back",
    "done",
)
