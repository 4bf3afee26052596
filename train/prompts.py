"""User prompts for the teacher: templates x topics, deterministic (seeded)."""
import random
import re

TOPICS = """cats dogs the ocean the moon the sun rain snow volcanoes bees trees rivers mountains
deserts forests birds fish whales elephants lions horses cows chickens bread cheese coffee tea
chocolate apples bananas rice pasta pizza soup salad water sleep exercise running swimming
walking cycling yoga music the piano the guitar painting drawing photography reading books
poetry writing history ancient Egypt the Roman Empire castles knights pirates trains cars
airplanes rockets space stars planets Mars Jupiter black holes gravity electricity magnets
light sound rainbows clouds weather seasons winter summer spring autumn gardening flowers
vegetables farming cooking baking recycling plastic energy solar power wind power batteries
computers the internet email smartphones robots programming Python math fractions geometry
numbers time clocks calendars money saving money budgeting shopping friendship family
kindness honesty patience teamwork leadership school homework exams studying learning a
language English grammar spelling vocabulary maps countries France Japan Brazil Canada India
Kenya cities villages houses bridges roads recipes breakfast lunch dinner birthdays holidays
games chess football basketball tennis the Olympics teeth the heart the brain the skin
vitamins colds hand washing first aid fire safety emergencies volunteering pets hamsters
rabbits turtles frogs butterflies ants spiders dinosaurs fossils rocks crystals the weather
forecast climate the Arctic penguins polar bears the rainforest camping hiking maps and
compasses boats sailing the beach sand castles kites balloons the circus museums libraries
hospitals doctors nurses teachers firefighters farmers scientists inventors the printing press
the wheel paper ink glass metal wood cotton wool silk color red blue green yellow shapes
circles triangles squares a small town a busy city a quiet morning a rainy day a long journey
a lost key a new friend a brave mouse a sleepy dragon a helpful robot a curious child""".split()

TEMPLATES = [
    "What is {t}?", "Tell me about {t}.", "Explain {t} to a child.", "Write a short story about {t}.",
    "Give me three facts about {t}.", "Why is {t} important?", "Write a short poem about {t}.",
    "What are some tips about {t}?", "Describe {t} in a few sentences.", "How does {t} work?",
    "What should I know about {t}?", "Can you help me understand {t}?", "Write a paragraph about {t}.",
    "List five words related to {t}.", "What is interesting about {t}?", "Summarize what {t} is.",
    "Tell me a fun story about {t}.", "How can I learn more about {t}?", "What do people like about {t}?",
    "Give me a simple explanation of {t}.",
]

GENERAL = [
    "Hello! How are you?", "What can you do?", "Who are you?", "Can you tell me a joke?",
    "What is the capital of France?", "How many days are in a week?", "What is 2 plus 3?",
    "How do I make a cup of tea?", "How can I sleep better?", "What is a good way to start the day?",
    "How do plants grow?", "Why is the sky blue?", "What makes a good friend?",
    "How do I stay focused while studying?", "What is the difference between weather and climate?",
    "Write a haiku about autumn.", "Give me a healthy breakfast idea.", "How do I say thank you politely?",
    "What are the primary colors?", "How does a rainbow form?", "Thank you for your help!",
]


# The teacher writing its own questions (train.py gen --self-questions): the templates above
# teach a small student their 20 phrasings and little else (docs/flash-mini.md: relevance on
# free-form questions is a third of the teacher's), so the teacher is asked to write the
# questions too, in its own words, and clean_question() keeps the usable ones.
META = [
    "Write one question that a curious person might ask about {t}. Write only the question.",
    "Write one question a child might ask about {t}. Write only the question.",
    "Write one question a beginner might ask about {t}. Write only the question.",
    "Write one everyday question about {t} that someone might type into a chat. Write only the question.",
    "Write one request about {t} that someone could give a helpful assistant. Write only the request.",
    # not "...that starts with How, Why, What or Can": the teacher echoes the list back
    "Write one question about {t} that a student might ask a teacher. Write only the question.",
]
IMPERATIVE = {"Write", "Explain", "Tell", "Give", "Describe", "List", "Help", "Suggest", "Show", "Teach",
              "Recommend", "Share", "Create", "Compose", "Make", "Plan", "Name", "Compare", "Summarize"}
NOT_A_QUESTION = {"i", "i'd", "i'm", "sure", "sure,", "as", "certainly", "certainly!", "here", "here's",
                  "of", "absolutely", "absolutely!", "okay", "ok", "great", "yes", "no"}


def meta_prompts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    ts = topics()
    return [rng.choice(META).format(t=rng.choice(ts)) for _ in range(n)]


def clean_question(text: str) -> str | None:
    """The question in the teacher's reply to a META prompt, or None when there is none."""
    t = text.strip().split("\n")[0].strip()
    m = re.search(r'"([^"]{8,200}[?.])"', t)          # a quoted question inside chatter
    if m:
        t = m.group(1)
    if ": " in t and len(t.rsplit(": ", 1)[1].split()) >= 3:   # "A curious person might ask: ..."
        t = t.rsplit(": ", 1)[1]
    t = re.sub(r"^\d+[.)]\s*", "", t).strip().strip('"').strip()   # "1005. ", stray quotes
    if "?" in t:
        t = t[:t.index("?") + 1]
        t = re.split(r"(?<=[.!])\s+", t)[-1]   # "Awesome! I'd be happy to help. What's ...?"
    words = t.split()
    if not 3 <= len(words) <= 40 or words[0].lower() in NOT_A_QUESTION or "<|" in t:
        return None
    if re.search(r"\bquestions?\b|\bask(s|ed|ing)?\b", t.lower()):   # about asking, not a question
        return None
    if t.endswith("?") or words[0] in IMPERATIVE:
        return t
    return None


def topics() -> list[str]:
    # multi-word topics are written with spaces in the list above only at the end ("a brave
    # mouse"); joining tokens greedily on articles keeps them whole
    out, cur = [], []
    for w in TOPICS:
        cur.append(w)
        if w in ("the", "a", "an", "and", "of", "new", "small", "busy", "quiet", "rainy", "long", "lost",
                 "brave", "sleepy", "helpful", "curious", "ancient", "first", "hand", "fire", "solar",
                 "wind", "saving", "learning", "English", "sand", "polar", "black", "printing", "primary"):
            continue
        out.append(" ".join(cur))
        cur = []
    return out


def prompts(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    ts = topics()
    out = []
    while len(out) < n:
        if rng.random() < 0.08:
            out.append(rng.choice(GENERAL))
        else:
            out.append(rng.choice(TEMPLATES).format(t=rng.choice(ts)))
    return out


if __name__ == "__main__":
    print(len(topics()), topics()[:40])
    print(prompts(10))
    print(meta_prompts(3, 0))
    for t in ["Is the volcano, as you know it, erupting into the sky?", "1005. How can you make pasta.",
              'I\'d be happy to help. Can you ask: "What is the best way to cook a vegan burger?"',
              "SHE: Can you explain what that little crescent moon is?", "Sure! Here you go.",
              "Write a short poem about rain for my sister.", "What's one question to ask about studying?",
              "A curious person might ask: What's a mysterious map that's used in ancient cultures?",
              '"What\'s the inner structure of a rocket called?',
              "Awesome! I'd be happy to assist you. What's a fun family story to tell?"]:
        print(repr(t), "->", repr(clean_question(t)))
