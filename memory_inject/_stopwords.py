"""Function words: dropped from recall queries and never a query's content on their own."""

from __future__ import annotations

__all__ = ["REQUEST_WORDS", "STOPWORDS"]

# Function words: enough that "what is the ..." does not dominate an OR-query, few
# enough that no content word is lost. The longer list lifted LoCoMo R@5 from 0.539 to
# 0.547 (benchmarks/locomo.py).
_MORE_FUNCTION_WORDS = (
    "about above after again against all am any because been before being below between both "
    "but could doing down during each few further having he her here hers herself him himself "
    "his if into itself me more most my myself off once only other ought our ours ourselves out "
    "over own same she should some such than then there these those through too under until up "
    "very we would yours yourself yourselves also can"
).split(" ")

# What a contraction leaves of its function word once the tokenizer splits at the
# apostrophe: "I'm", "I've", "I'd", "we're", "you'll" ("s" and "t" are below). Each was a
# content word no fact stored in the third person holds, so "I'm wondering, what is my dog
# called?" answered 1 of benchmarks/facts.py's 43 questions ("I wonder, ...": 13).
_CONTRACTION_PARTS = ("d", "ll", "m", "re", "ve")
# The same contractions typed without the apostrophe ("whats my name", "dont remember",
# "im wondering"), as people type to a chat: only the forms that are no word of their
# own ("id", "ill", "well", "shell", "lets" stay words). benchmarks/facts.py: "whats my
# name" weighed "whats" as a word no fact holds.
_UNAPOSTROPHISED = (
    "whats wheres whos hows whens whys thats theres heres dont doesnt didnt isnt arent "
    "wasnt werent havent hasnt hadnt cant couldnt wouldnt shouldnt wont im ive youre youve "
    "youll theyre theyve weve shes hes"
).split(" ")
# Negations: a keyword query ORs its words, so "not" only draws rows that say "not" ("I
# do not remember, what is my dog called?" answered 13 of the 43). What a negated
# question is about is in its other words; only queries drop these (a memory's text is
# stored and shown as written). A contraction's ("don't", "won't") goes whole, before
# the tokenizer splits it (``fusion.content_words``): "don" and "won" are words too.
_NEGATIONS = ("not", "no", "nor")
# Interjections and greetings ("hey, ...", "hmm, ...", "btw ..."): never what is asked
# about, and chats are full of them ("Hey Mel!", "Wow, ..."), so each drew rows
# (benchmarks/frames.py: "hmm, <question>" 0.351 block recall, bare 0.567).
_INTERJECTIONS = (
    "hi hello hey heya hiya yo howdy lol lmao rofl haha hahaha hehe heh hmm hm mhm uh um umm "
    "oh ah aha wow oops ok okay btw ugh meh idk dunno yeah yep yup nope pls plz thx"
).split(" ")
_BASIC_FUNCTION_WORDS = (
    "a an and are as at be by did do does for from had has have how i in is it its of on or "
    "s so t that the their them they this to was were what when where which who why will "
    "with you your"
).split(" ")
STOPWORDS = frozenset(
    (
        *_BASIC_FUNCTION_WORDS,
        *_MORE_FUNCTION_WORDS,
        *_CONTRACTION_PARTS,
        *_UNAPOSTROPHISED,
        *_NEGATIONS,
        *_INTERJECTIONS,
    )
)

#: Words that say what to do with the answer, not what it is about: a prompt
#: "summarise X" is about X. Dropped from queries like stopwords.
REQUEST_WORDS = frozenset(
    {"summarise", "summarize", "tell", "explain", "describe", "remind", "please"}
) | frozenset(
    # Words of asking a memory, not of what is asked: "do you remember / know what my dog
    # is called?", "I'm wondering, ...", "I forgot, ...". Each weighed as a word the store
    # lacks and kept the answer out (benchmarks/facts.py --frames: 13 of 43 answered
    # behind "do you remember", 31 bare); LoCoMo's numbers do not move.
    "remember remembered remembering recall recalled forget forgot forgotten "
    "wonder wondering wondered curious know knew".split()
)
