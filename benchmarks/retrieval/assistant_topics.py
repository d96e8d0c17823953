"""Text of the assistant-style corpus: what a person asks an assistant about, and its answers.

Each :class:`Topic` holds requests a person makes about it with no personal
fact in them (they fill the sessions and are the near misses of the planted
facts), and sentences of advice the assistant strings into long answers.
Follow-ups and openers are shared by every topic.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Topic:
    """One subject of sessions: generic requests and sentences of advice."""

    name: str
    requests: tuple[str, ...]
    advice: tuple[str, ...]


def _topic(name: str, requests: str, advice: str) -> Topic:
    """A topic from two blocks of text, one request or sentence a line."""
    return Topic(name, _lines(requests), _lines(advice))


def _lines(block: str) -> tuple[str, ...]:
    return tuple(line.strip() for line in block.strip().splitlines() if line.strip())


TOPICS = {
    t.name: t
    for t in (
        _topic(
            "dogs",
            """
            How do I stop a dog from pulling on the leash during walks?
            What's the best way to teach a dog to come when called?
            Is it okay to leave a puppy in a crate overnight?
            How much exercise does a medium-sized dog need every day?
            What are good chew toys for a dog that destroys everything?
            How often should a dog go to the vet for checkups?
            """,
            """
            Keep training sessions short, five to ten minutes, and end on a success.
            Reward the behaviour you want the moment it happens, with a small treat or praise.
            A crate should feel like a den: add a blanket and never use it as punishment.
            Most dogs do well with two walks a day plus some play in between.
            Puppies need to go outside right after waking up, eating and playing.
            Consistency matters more than anything: everyone at home should use the same cues.
            Rotating toys every few days keeps them interesting without buying new ones.
            If the leash pulling continues, stop walking until the leash goes slack again.
            A tired dog is usually a calmer dog, so mental games like sniffing mats help too.
            Ask your vet about a vaccination schedule and a flea and tick plan.
            """,
        ),
        _topic(
            "cooking",
            """
            What's a quick weeknight dinner I can make in under thirty minutes?
            How do I keep chicken breast from drying out?
            Can you give me a simple pasta sauce recipe from scratch?
            What spices should every kitchen have?
            How do I meal prep lunches for a whole week?
            What can I cook for a dinner party of six people?
            """,
            """
            A sheet-pan dinner saves time: roast vegetables and a protein together at high heat.
            Brining or marinating the meat for even thirty minutes keeps it much juicier.
            Season in layers, a little at each step, and taste as you go.
            Cumin, smoked paprika, chili flakes, oregano and garlic powder cover a lot of dishes.
            Cook grains and proteins in bulk on Sunday and mix different sauces through the week.
            A good knife and a heavy pan make more difference than any gadget.
            Let meat rest for five minutes after cooking so the juices settle.
            Fresh herbs added at the end brighten almost any dish.
            For a crowd, choose dishes that can be made ahead and reheated gently.
            Salt the pasta water generously: it should taste like the sea.
            """,
        ),
        _topic(
            "baking",
            """
            Why did my bread come out dense?
            How do I make a sourdough starter from scratch?
            What's the difference between baking soda and baking powder?
            Can you give me a foolproof chocolate chip cookie recipe?
            How do I know when a cake is done baking?
            How should I store leftover pastries so they stay fresh?
            """,
            """
            Weigh your flour instead of using cups: it is the most common source of dense results.
            Make sure your yeast or starter is active, bubbly and roughly doubled before using it.
            Baking soda needs an acid to react, while baking powder already contains one.
            Chill cookie dough for at least an hour for thicker cookies with better flavour.
            A skewer inserted in the centre of a cake should come out with a few moist crumbs.
            Oven temperatures vary a lot, so an inexpensive oven thermometer is worth having.
            Let bread cool completely before slicing or the crumb turns gummy.
            Store crisp pastries uncovered and soft ones in an airtight container.
            Room temperature butter and eggs mix more evenly into a batter.
            Most baked goods freeze well for a month if wrapped tightly.
            """,
        ),
        _topic(
            "travel",
            """
            How do I plan a week-long trip on a budget?
            What should I pack for a long weekend away?
            Is it better to book flights on a weekday?
            How do I deal with jet lag after a long flight?
            What are some tips for travelling with just a carry-on bag?
            How far in advance should I book accommodation?
            """,
            """
            Set a daily budget first and fit the itinerary to it, not the other way round.
            Pack clothes that mix and match, and roll them to save space.
            Flights mid-week are often cheaper, and fare alerts help you catch drops.
            Get into the local schedule right away and spend time in daylight on the first day.
            Neighbourhoods just outside the centre are often cheaper and quieter.
            Keep copies of your passport and bookings in your email and on your phone.
            Public transport passes for tourists can save a lot if you move around daily.
            Leave one afternoon unplanned: the best moments of a trip are often unscheduled.
            Check the entry requirements and the visa rules well before you book.
            Travel insurance is worth it for anything longer than a few days.
            """,
        ),
        _topic(
            "running",
            """
            How do I train for my first 10K?
            What should I eat before a long run?
            How do I avoid shin splints?
            How many rest days should a runner take each week?
            What's a good pace for easy runs?
            Should I stretch before or after running?
            """,
            """
            Increase your weekly mileage by no more than about ten percent a week.
            Most of your runs should be easy, at a pace where you can still hold a conversation.
            A light meal with carbohydrates two to three hours before a long run suits most people.
            Good running shoes fitted at a specialist store help prevent many injuries.
            Include one or two rest days a week, and treat sleep as part of training.
            Strength work for the hips and calves makes a big difference for injury prevention.
            Dynamic warm-ups before a run and gentle stretching afterwards are a good routine.
            Interval sessions once a week build speed without much extra mileage.
            Hydrate during runs longer than an hour, especially in warm weather.
            After a race, take a few easy days before you start training hard again.
            """,
        ),
        _topic(
            "fitness",
            """
            Can you make me a beginner strength training plan?
            How many sets and reps should I do to build muscle?
            What's a good warm-up before lifting?
            How do I stay motivated to work out regularly?
            Is it better to do cardio before or after weights?
            How do I fix my squat form?
            """,
            """
            Three full-body sessions a week is a great starting point for beginners.
            Three to four sets of eight to twelve repetitions works well for building muscle.
            Progressive overload is the key: add a little weight or a repetition every week.
            Warm up with five minutes of light cardio and a few lighter sets of the first lift.
            Schedule workouts like appointments and track them so you can see progress.
            If strength is the goal, lift before cardio so you are fresh for the heavy sets.
            Keep your chest up and push your knees out in line with your toes when you squat.
            Protein spread across the day supports recovery after training.
            Rest at least a day between hard sessions for the same muscle groups.
            Film a set from the side to check your form, it reveals a lot.
            """,
        ),
        _topic(
            "books",
            """
            Can you recommend a good novel for a long flight?
            How can I read more books each year?
            What are some classics that are actually fun to read?
            How do I start a book club with friends?
            Can you suggest some nonfiction about science?
            Is it worth keeping a reading journal?
            """,
            """
            Carry a book everywhere: ten minutes here and there adds up to several books a year.
            Audiobooks are a great way to read during commutes and chores.
            Give yourself permission to drop a book that does not hold your attention.
            A book club works best with a regular date and a rotating host who picks the book.
            Short story collections are good when your attention is scattered.
            Writing one paragraph after each book helps you remember it years later.
            Library apps let you borrow ebooks and audiobooks for free.
            Alternate heavy books with lighter ones to keep your momentum.
            Reading before bed instead of scrolling improves sleep for many people.
            Ask friends for their favourite book of the year: it is a good way to find surprises.
            """,
        ),
        _topic(
            "music",
            """
            How long should I practise an instrument each day?
            How do I learn to read sheet music?
            What's the best way to memorise a piece?
            How do I get over stage fright before a recital?
            Should I take lessons or learn from videos?
            How do I keep my fingers from hurting when I practise?
            """,
            """
            Short daily practice beats one long session a week.
            Start each session with scales or technical exercises, then move to pieces.
            Practise difficult passages slowly with a metronome and speed up gradually.
            Recording yourself is the fastest way to hear what needs work.
            A teacher can catch bad habits early, even if you only meet once a month.
            Break a piece into small sections and memorise them one at a time.
            Performing for friends first makes recitals much less frightening.
            Take a short break every twenty minutes to rest your hands.
            Learning some music theory helps you understand what you are playing.
            Set a small goal for each week so practice has a direction.
            """,
        ),
        _topic(
            "coding",
            """
            How do I reverse a list in Python?
            What's the difference between a list and a tuple?
            How do I undo my last git commit?
            How should I structure a small Python project?
            What's a good way to learn SQL?
            How do I write unit tests in Python?
            """,
            """
            Python's built-in functions cover most everyday tasks, so check the docs first.
            Lists are mutable while tuples are not, which makes tuples usable as dictionary keys.
            Commit small changes often with messages that say why, not just what.
            Keep code in a package folder, tests in a tests folder, a pyproject.toml at the root.
            Practise SQL on a real dataset: it sticks much better than toy examples.
            pytest makes tests short: plain functions and assert statements.
            A virtual environment per project keeps dependencies from clashing.
            Read error messages from the bottom up, the last line usually names the problem.
            Use a linter and a formatter so you never argue about style.
            When stuck, write the smallest example that shows the problem.
            """,
        ),
        _topic(
            "money",
            """
            How do I make a monthly budget?
            How big should an emergency fund be?
            Should I pay off debt or invest first?
            How do I stop impulse buying?
            What's a good way to save for a vacation?
            How do I track my spending without it being a chore?
            """,
            """
            Start by listing fixed costs, then set amounts for flexible categories.
            Three to six months of expenses is the usual target for an emergency fund.
            Pay off high-interest debt first: it is a guaranteed return.
            Wait twenty-four hours before any purchase that was not planned.
            Automatic transfers on payday make saving painless.
            A separate savings account for each goal makes progress visible.
            Review subscriptions every few months and cancel the ones you do not use.
            Banking apps can categorise spending automatically.
            Low-cost index funds are a simple option for long-term investing.
            Round numbers make a budget easier to follow.
            """,
        ),
        _topic(
            "plants",
            """
            How often should I water houseplants?
            Why are the leaves on my plant turning yellow?
            What are some plants that are hard to kill?
            How do I repot a plant without hurting it?
            When should I start seeds for a vegetable garden?
            What's the best soil for succulents?
            """,
            """
            Water when the top inch of soil is dry rather than on a fixed schedule.
            Yellow leaves usually mean too much water, so check that the pot drains well.
            Pothos, snake plants and ZZ plants tolerate low light and irregular watering.
            Repot in spring, into a pot only one size larger than the current one.
            Start most vegetable seeds indoors six to eight weeks before the last frost.
            Succulents need a gritty, fast-draining mix and lots of light.
            Group plants together to raise humidity around them.
            Wipe dusty leaves so the plant can take in light properly.
            Fertilise lightly during the growing season and not at all in winter.
            Turn pots a quarter turn every week so plants grow evenly.
            """,
        ),
        _topic(
            "home",
            """
            How do I fix a dripping tap?
            What's the best way to paint a room without streaks?
            How do I get rid of mould in the bathroom?
            What tools should every home have?
            How can I make my flat warmer in winter without raising the bill?
            How do I hang heavy shelves on a plaster wall?
            """,
            """
            Turn off the water supply under the sink before you take anything apart.
            A dripping tap usually just needs a new washer or cartridge.
            Use a roller with a medium nap and keep a wet edge to avoid streaks.
            Mould comes back without ventilation, so run the extractor fan after showers.
            A drill, a level, a stud finder and a good screwdriver set cover most jobs.
            Draught excluders and thick curtains keep a lot of heat in.
            Heavy shelves need wall anchors rated for the weight or a screw into a stud.
            Bleed radiators at the start of winter so they heat evenly.
            Take photos before you disconnect anything so you know how it goes back.
            Small repairs done early save expensive ones later.
            """,
        ),
        _topic(
            "writing",
            """
            Can you help me write a polite email declining an invitation?
            How do I write a wedding toast?
            Can you make this paragraph more concise?
            How do I write a thank-you note to a colleague?
            What's a good structure for a short speech?
            Can you help me write a cover letter?
            """,
            """
            Open with the main point, then give the details, and close with a clear next step.
            A good toast is short: a story, a compliment, and a raised glass.
            Cut adverbs and replace weak verbs with specific ones.
            Mention one concrete thing the person did: it makes a thank-you note sincere.
            Structure a speech around one idea with three supporting points.
            Read your draft aloud, clumsy sentences are easy to hear.
            A cover letter should connect your experience to the needs of the job.
            Keep emails under five sentences when you can.
            End with warmth, even in a message that says no.
            Leave the draft for an hour and edit it with fresh eyes.
            """,
        ),
        _topic(
            "language",
            """
            What's the fastest way to learn basic Spanish?
            How do I practise speaking a language without a partner?
            Are language apps enough to become fluent?
            How many new words should I learn each day?
            How do I stop translating in my head?
            What are some good podcasts for learning Italian?
            """,
            """
            Focus on the thousand most common words first: they cover most everyday speech.
            Shadowing, repeating audio right after the speaker, improves pronunciation quickly.
            Apps are good for vocabulary, but you need conversation practice to become fluent.
            Ten to fifteen new words a day with spaced repetition is sustainable.
            Describe your day out loud in the language, even with simple sentences.
            Watching shows with subtitles in the target language helps listening a lot.
            Language exchange meetups are free and friendly.
            Learn whole phrases rather than isolated words.
            Mistakes are part of the process, speak before you feel ready.
            Keep a small notebook of phrases you wanted to say but could not.
            """,
        ),
        _topic(
            "photography",
            """
            How do I take sharper photos?
            What settings should I use for night photography?
            How do I edit photos without making them look fake?
            What's the rule of thirds?
            What lens should I buy for portraits?
            How do I photograph a moving subject?
            """,
            """
            Use a faster shutter speed, at least one over the focal length, to avoid blur.
            At night, a tripod lets you keep the ISO low and the shutter open longer.
            Make small adjustments to exposure and white balance before anything else.
            Place your subject on a third of the frame rather than the centre.
            A 50mm prime lens is an affordable favourite for portraits.
            Continuous autofocus and burst mode help with moving subjects.
            Shoot during the golden hour for soft, warm light.
            Shoot in RAW if you plan to edit: it keeps much more detail.
            Look at the edges of the frame before you press the shutter.
            Clean the lens, smudges soften photos more than people expect.
            """,
        ),
        _topic(
            "cars",
            """
            How often should I change the oil in my car?
            What should I check before a long road trip?
            How do I improve my car's fuel economy?
            Is it worth buying an extended warranty?
            How do I jump-start a car?
            What does the check engine light mean?
            """,
            """
            Most modern cars need an oil change every five to ten thousand miles, check the manual.
            Check tyre pressure, oil, coolant and wipers before any long drive.
            Smooth acceleration and the right tyre pressure improve fuel economy.
            Extended warranties rarely pay off for reliable models.
            Connect the jumper cables red to red, then black to an unpainted metal surface.
            A cheap code reader tells you why the check engine light is on.
            Rotate the tyres every other oil change so they wear evenly.
            Keep an emergency kit with water, a torch and a blanket in the boot.
            Strange noises are cheaper to fix early.
            Wash the underside of the car after winter to remove road salt.
            """,
        ),
        _topic(
            "events",
            """
            How do I plan a surprise birthday party?
            What should I wear to a summer wedding?
            How much should I spend on a wedding gift?
            How do I make a concert night go smoothly?
            What are good games for a party with adults?
            How do I host a dinner for friends on a budget?
            """,
            """
            Pick a date and a guest list first, everything else follows from them.
            For a summer wedding, light fabrics and a jacket you can take off work well.
            A wedding gift usually matches what you can afford and how close you are.
            Buy concert tickets from official sellers to avoid fakes.
            Plan how you will get home from a late event before you go.
            Party games that need no setup, like charades, suit adults well.
            A potluck keeps a dinner affordable and makes everyone feel part of it.
            Send invitations at least three weeks ahead for a weekend party.
            Have one simple activity ready in case conversation dies down.
            Write a quick thank-you message to the hosts the next day.
            """,
        ),
        _topic(
            "career",
            """
            How do I prepare for a job interview?
            How should I ask for a raise?
            How do I update my resume for a career change?
            What should I say when an interviewer asks about weaknesses?
            How do I negotiate a job offer?
            How can I be more productive at work?
            """,
            """
            Prepare three stories that show how you solved a problem, with results.
            Ask for a raise with evidence: what you delivered and what the market pays.
            Lead your resume with the skills that transfer to the new field.
            Name a real weakness and what you are doing to improve it.
            Always negotiate politely: most offers have some room.
            Block time in your calendar for focused work and protect it.
            Research the company and prepare two or three questions for the interviewer.
            Keep a running list of your achievements, it helps at review time.
            Follow up after an interview with a short thank-you email.
            Batch small tasks like email into two or three slots a day.
            """,
        ),
        _topic(
            "health",
            """
            How can I fall asleep faster?
            How much water should I drink a day?
            What are good snacks that keep me full?
            How do I reduce stress after work?
            Is it bad to sit all day at a desk?
            How do I build a morning routine that sticks?
            """,
            """
            Keep the same bedtime and wake time, even at weekends.
            Avoid screens for the last half hour before bed.
            Thirst is a good guide for most people, drink more when it is hot or you exercise.
            Snacks with protein and fibre, like yoghurt or nuts, keep you full longer.
            A short walk after work helps your mind switch off.
            Stand up and move for a few minutes every hour when you work at a desk.
            Start a morning routine with one small habit and add more later.
            Cut caffeine after early afternoon if you struggle to sleep.
            Breathing exercises, slow exhales especially, calm the body quickly.
            Talk to a doctor if sleep problems last more than a few weeks.
            """,
        ),
        _topic(
            "movies",
            """
            Can you recommend a good movie for a cosy night in?
            What are some great TV series to binge?
            What documentaries are worth watching?
            Can you suggest a film for a family movie night?
            What are some underrated comedies?
            How do I find good foreign films?
            """,
            """
            Mini-series are a good choice when you do not want a long commitment.
            Film festivals' award lists are a reliable source of foreign films.
            Animated films from good studios usually work for every age.
            Check a few reviews, but trust the genres you already enjoy.
            Documentaries about nature and food are easy to enjoy with others.
            Watching with subtitles lets you catch every line of dialogue.
            Older comedies often hold up better than people expect.
            A watchlist app helps you remember what friends recommended.
            Turning off the lights and putting phones away makes a movie night feel special.
            Try a director's earlier films once you like one of their later ones.
            """,
        ),
    )
}

#: What a person says next in a session, on any topic (no personal fact, few topic words).
FOLLOW_UPS = _lines(
    """
    Thanks, that helps. Can you make it a bit shorter?
    Could you put that into a short checklist?
    What if I only have a small budget?
    Can you give me a few more options?
    That makes sense. What would you do first?
    Is there anything I should avoid?
    How long does that usually take?
    Great, can you explain the second point in more detail?
    Okay, and what if that doesn't work?
    Could you summarise that in two sentences?
    Perfect, thank you!
    Any common mistakes people make with this?
    What would a good first step be this week?
    Can you give me an example?
    Is this different for beginners?
    """
)

#: How the assistant opens an answer.
OPENERS = _lines(
    """
    Great question! Here are a few things that usually help.
    Happy to help with that.
    Sure, here is what I would suggest.
    Absolutely, let me walk you through it.
    Good thinking to plan this ahead.
    That is a common question, and the good news is it is manageable.
    Of course! Here is a practical approach.
    """
)

#: How the assistant closes an answer.
CLOSERS = _lines(
    """
    Let me know if you would like more detail on any of these.
    Would you like me to turn this into a step-by-step plan?
    I hope that helps, and feel free to ask follow-up questions.
    Tell me more about your situation and I can tailor this further.
    If you want, I can suggest a schedule for this.
    """
)

__all__ = ["CLOSERS", "FOLLOW_UPS", "OPENERS", "TOPICS", "Topic"]
