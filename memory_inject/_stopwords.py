"""Function words: dropped from recall queries and never a query's content on their own."""

from __future__ import annotations

__all__ = ["REQUEST_WORDS", "STOPWORDS"]

# Function words only (no negations): enough that "what is the ..." does not
# dominate an OR-query, few enough that no content word is lost. The longer
# list lifted LoCoMo R@5 from 0.539 to 0.547 (benchmarks/locomo.py).
_MORE_FUNCTION_WORDS = (
    "about above after again against all am any because been before being below between both "
    "but could doing down during each few further having he her here hers herself him himself "
    "his if into itself me more most my myself off once only other ought our ours ourselves out "
    "over own same she should some such than then there these those through too under until up "
    "very we would yours yourself yourselves also"
).split(" ")

STOPWORDS = frozenset(_MORE_FUNCTION_WORDS) | frozenset(
    (
        "a an and are as at be by did do does for from had has have how i in is it its of on or "
        "s so t that the their them they this to was were what when where which who why will "
        "with you your"
    ).split(" ")
)

#: Words that say what to do with the answer, not what it is about: a prompt
#: "summarise X" is about X. Dropped from queries like stopwords.
REQUEST_WORDS = frozenset(
    {"summarise", "summarize", "tell", "explain", "describe", "remind", "please"}
)
