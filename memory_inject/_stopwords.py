"""Function words: dropped from recall queries and never a query's content on their own."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

__all__ = ["REQUEST_WORDS", "STOPWORDS", "foreign_function_words", "korean_term"]

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


def _plain(word: str) -> str:
    """``word`` without its accents ("déjà" -> "deja", "heißt" -> "heisst"), as phones type."""
    decomposed = unicodedata.normalize("NFKD", word.replace("ß", "ss"))
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def _words(text: str) -> frozenset[str]:
    """The words of ``text``, each also without its accents (a drop set: harmless extras)."""
    split = text.split()
    return frozenset(split) | {_plain(w) for w in split}


#: Function words of French, German, Spanish, Italian and Portuguese: (the words that say
#: a prompt is in that language, the words that support one of them, every function word
#: of it). The first set holds no English word, nor a name or abbreviation an English
#: prompt is likely to hold ("comment", "den", "hat", "con", "hay", "mit", "des", "les",
#: "el", "los", "mon", "ton", "über", "come", "per", "do", "um", "all", "pro", "dell", "mia" are
#: left out, and accents are spelled out where the plain form is English: "à" is not
#: "a"), so an English prompt that names "Los Angeles" and "El Paso" is not taken for
#: Spanish. The second holds such names and abbreviations ("Les", "LA", "Des", "von"; not
#: "a", "i", "s", "do": English words), the third English words too ("son" is "his"; "a",
#: "me", "on" are words of both). A prompt holding two words of a language's first set, or
#: one and two of its second, drops its third set's words as it drops English stopwords
#: (benchmarks/facts.py --prompts benchmarks/facts_fr.json: "c'est quoi le code de la
#: porte ?" weighed c, est, quoi, le, de and la as words no fact holds).
_FOREIGN = (
    (
        frozenset(
            "est quoi quel quelle quels quelles quand où ou pourquoi combien je tu nous vous "
            "ils elles mes tes notre nos votre vos sont suis était etait dans avec chez déjà "
            "deja ça cette ces aux une qui que qu lequel laquelle lesquels lesquelles il "
            "appelle moi toi".split()
        ),
        frozenset("le la les l de du des un à au ce se sa ma ses j en cet elle".split()),
        _words(
            "le la les l un une des du de d au aux à et ou où est c ce cet cette ces ça qui "
            "que qu quoi quel quelle quels quelles quand comment combien pourquoi je j tu il "
            "elle on nous vous ils elles me m te t se s moi toi lui leur leurs mon ma mes ton "
            "ta tes son sa ses notre nos votre vos suis es sommes êtes sont ai as a avons avez "
            "ont était été être avoir fait dans sur sous avec pour par chez en y ne n pas plus "
            "déjà encore aussi alors donc mais si lequel laquelle lesquels lesquelles appelle "
            "appellent rappelle dis"
        ),
    ),
    (
        frozenset(
            "der das dem und ist sind bist hast haben ich du wir mein meine meinen meinem "
            "meiner dein deine wann wo wie wer welche welcher welches welchen welchem warum "
            "wieso woher wohin wieviel nochmal noch schon nicht hab zu zum zur auf bei für "
            "heißt heisst ein eine einen einem einer eigentlich jetzt grad gerade vom".split()
        ),
        frozenset("die den des im von dem bin geht".split()),
        _words(
            "der die das den dem des ein eine einen einem einer eines und oder ist sind war "
            "waren bin bist hat habe hast haben wird werden ich du er sie es wir ihr mein meine "
            "meinen meinem meiner dein deine sein seine ihre unser unsere mich mir dich dir sich "
            "uns wann wo was wie wer wen wem welche welcher welches welchen wieviel warum wieso "
            "weshalb woher wohin nochmal noch schon auch nicht kein keine mit von zu zum zur im "
            "am um an auf aus bei für nach vor über unter in bis denn doch mal ja heißt gibt "
            "kannst kann muss soll heißen hab"
        ),
    ),
    (
        frozenset(
            "qué que quién quien cuál cual cuándo cuando dónde donde cómo como cuánto cuanto "
            "cuánta cuanta cuántos cuantos cuántas cuantas porque para es está esta están "
            "estan estoy tengo tiene tienes mis tus nuestro nuestra usted una mi eres "
            "soy ¿".split()
        ),
        frozenset("el los las la lo del al de y se le un por en ella".split()),
        _words(
            "el la los las lo un una unos unas de del al a y o u e que qué quien quién cual cuál "
            "cuales cuándo cuando dónde donde como cómo cuánto cuanto cuánta cuanta cuántos "
            "cuantos cuántas cuantas por para porque es son era fue soy eres está esta están "
            "estoy tengo tiene tienes tenemos hay mi mis tu tus su sus nuestro nuestra nuestros "
            "nuestras me te se nos le les yo tú él ella ellos ellas usted con sin en sobre ya no "
            "sí si también muy más llama llaman"
        ),
    ),
    (  # Italian
        frozenset(
            "che chi cosa quando dove perché perche quale quali quanto quanti quanta quante "
            "sono sei siamo è mio miei mie tuo tua nostro nostra gli della delle degli "
            "dello nel nella nei sul sulla ho hai abbiamo hanno posso devo anche ancora già "
            "questo questa quello quella ricordi chiamo chiama".split()
        ),
        frozenset("la le di da un una del l il mi ti ci lo si".split()),
        _words(
            "il lo la i gli le l un uno una di a da in con su per tra fra del dello della dei "
            "degli delle al allo alla ai agli alle dal dalla dai nel nella nei negli nelle sul "
            "sulla sui dell all dall nell e ed o che chi cosa come quando dove perché quale "
            "quali quanto quanti quanta quante è sono sei siamo siete era ho hai ha abbiamo "
            "avete hanno mi ti ci vi si me te ne li mio mia miei mie tuo tua tuoi tue suo sua "
            "suoi sue nostro nostra nostri nostre non più già ancora anche questo questa "
            "quello quella ricordi ricordo chiamo chiama chiamano posso devo"
        ),
    ),
    (  # Portuguese
        frozenset(
            "qual quais quando onde como quem quanto quanta quantos quantas porque meu minha "
            "meus minhas você voce vc é são sou estou está tenho não nao já dos das pra pelo "
            "pela mesmo lá lembra que tô tá esse essa isso ainda".split()
        ),
        frozenset("os de da em uma na nos com se um mais dá".split()),
        _words(
            "o os a as um uma uns umas de do da dos das em no na nos nas num numa por pelo pela "
            "pelos pelas pra pro para com sem e ou que quem qual quais quando onde como quanto "
            "quanta quantos quantas porque é são sou somos era foi estou está estão tenho tem "
            "temos eu você voce vc ele ela eles elas me te se lhe meu minha meus minhas seu sua "
            "seus suas nosso nossa não já mesmo lá aí lembra lembro chama chamo"
        ),
    ),
)

#: Each telling (0) and supporting (1) word's ``(language, kind)`` pairs, for one lookup a
#: word (``language`` indexes ``_FOREIGN``).
_ROLES: dict[str, tuple[tuple[int, int], ...]] = {
    w: tuple((i, k) for i, sets in enumerate(_FOREIGN) for k in (0, 1) if w in sets[k])
    for sets in _FOREIGN
    for w in sets[0] | sets[1]
}


def foreign_function_words(words: Iterable[str]) -> frozenset[str]:
    """The function words to drop from a prompt of lowercased ``words``: those of each
    language (French, German, Spanish, Italian, Portuguese) whose telling words it holds
    two of, or one with two of its supporting words ("la", "de", "l'" for French: names
    and abbreviations in an English prompt, never enough alone), or one with one when
    the two are at least a quarter of a short prompt's words ("quanto pago na academia?";
    not "the call is at 5 EST in LA"); empty for an English prompt."""
    telling = [0] * len(_FOREIGN)
    supporting = [0] * len(_FOREIGN)
    seen = words if isinstance(words, list) else list(words)
    for w in set(seen):
        for i, kind in _ROLES.get(w, ()):
            (supporting if kind else telling)[i] += 1
    out: frozenset[str] = frozenset()
    for i, (n, m) in enumerate(zip(telling, supporting, strict=True)):
        if n >= 2 or (n == 1 and (m >= 2 or (m == 1 and 4 * (n + m) >= len(seen)))):
            out |= _FOREIGN[i][2]
    return out


#: A word of Hangul syllables only.
_HANGUL = re.compile("[\uac00-\ud7af]+")
#: Korean particles, longest first: written onto the noun they follow ("이름이", "이름은",
#: "예약은"), so the word index holds "이름은" where the prompt says "이름이".
_PARTICLES = sorted(
    (
        "에서는 에게서 으로는 이에요 에서 에게 한테 으로 까지 부터 이랑 이야 예요 하고 처럼 "
        "보다 은 는 이 가 을 를 의 에 로 와 과 도 만 야 요 랑"
    ).split(),
    key=len,
    reverse=True,
)
#: Korean question words, pronouns and asking words ("뭐야", "언제", "우리", "알려줘"):
#: never what a prompt is about.
_KOREAN_FUNCTION = frozenset(
    (
        "뭐 뭐야 뭐지 뭐였지 뭐였더라 뭐더라 뭔지 무엇 무슨 언제 언제야 언제였지 언제더라 "
        "어디 어디야 어디서 어디에 어디였지 어디더라 얼마 얼마야 얼마였지 얼마더라 얼마나 "
        "누구 누구야 누구더라 누구였지 왜 어떻게 몇 어느 우리 내 나 나의 내가 제 저 제가 저의 "
        "너 네 있어 있지 있나 알려줘 알려 줘 기억해 기억나 혹시 그 좀 했지 했어 거 건 게"
    ).split()
)


#: What a Korean question word starts with ("언제야", "어디서", "얼마였더라", "몇시"): a
#: word opening with one of these asks; it never names what the prompt is about.
_KOREAN_ASKING = (
    "뭐",
    "뭘",
    "언제",
    "어디",
    "얼마",
    "누구",
    "누가",
    "몇",
    "며칠",
    "어느",
    "어떤",
    "어떻게",
)
#: Whole words of the verbs "do", "be", "have", "become", "can" and "when" ("할 수 있어",
#: "해요", "있었지", "돼", "때"): the grammar around a question's nouns.
_KOREAN_AUXILIARY = frozenset(
    (
        "할 해 해요 했 했어 했어요 했지 했나 했더라 하는 한 하고 해야 하려면 하려고 하는데 "
        "했는데 해서 합니다 해줘 있어 있어요 있었어 있었지 있었나 있었더라 있나 있나요 있을까 "
        "있는 있는데 없어 없나 돼 돼요 되지 되나 될까 되는 됐어 됐지 수 때 거야 건가 건지 "
        "이었지 였지 였더라 이었더라 인데 인가 인지 중인데 지금"
    ).split()
)
#: The endings of a noun made a verb by "하다" / "되다" ("접속하려면", "예약했지",
#: "출근할"): the noun before them is what the prompt asks about, and a memory writes it
#: with another ending ("접속해야").
_KOREAN_VERB_ENDINGS = sorted(
    (
        "하려면 하려고 하는데 했는데 했더라 했어요 합니다 하는 하고 하지 해야 해요 해서 했어 "
        "했지 했나 해줘 할까 할 한 해 했 되는 됐어 됐지 되나 될까 돼요 돼 된 될"
    ).split(),
    key=len,
    reverse=True,
)


def korean_term(word: str) -> tuple[str, bool] | None:
    """How a lowercased ``word`` of Hangul is searched: its stem without a particle or a
    "하다" / "되다" ending, as a prefix (``("이름", True)`` for "이름이", which finds
    "이름은"; ``("예약", True)`` for "예약했지"), or the word itself when the stem would be
    one syllable; ``None`` for a question word, pronoun or auxiliary ("뭐야", "우리는",
    "있었지", "할"); the word unchanged when it is not Hangul."""
    if not _HANGUL.fullmatch(word):
        return (word, False)
    if word in _KOREAN_AUXILIARY or word.startswith(_KOREAN_ASKING):
        return None
    stem = word
    for ending in _KOREAN_VERB_ENDINGS:  # a noun made a verb: "예약했지" -> "예약"
        if word.endswith(ending) and len(word) - len(ending) >= 2:
            stem = word[: -len(ending)]
            break
    else:
        for particle in _PARTICLES:
            if word.endswith(particle) and len(word) > len(particle):
                stem = word[: -len(particle)]
                break
    if word in _KOREAN_FUNCTION or stem in _KOREAN_FUNCTION:
        return None
    return (stem, True) if len(stem) >= 2 else (word, False)
