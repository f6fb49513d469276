"""The threat scan's rule set: :class:`ThreatRule` and :data:`RULES`, versioned.

Each rule is a phrasing that addresses the model, never a topic; every rule
names the words it needs, so most memories are never searched. Bump
:data:`RULESET_VERSION` whenever a rule is added, removed or changes what it
matches (docs/pipeline.md lists the rules). The scan that applies them is
``stages/threat.py``, which re-exports these names.
"""

from __future__ import annotations

import re
import unicodedata

from attrs import field, frozen

from memory_inject.config.schema import THREAT_RULE_IDS
from memory_inject.stages._threat_view import JA_GOES_ON, ZH_OPENS, addressed, fold

__all__ = ["RULES", "RULESET_VERSION", "ThreatRule"]
RULESET_VERSION = 3  #: see the module docstring


def _word_set(words: str | frozenset[str]) -> frozenset[str]:
    return frozenset(words.split()) if isinstance(words, str) else frozenset(words)


@frozen
class ThreatRule:
    """One rule: its id (the reason is ``threat:<id>``), what it matches, and how.

    Every match holds one of ``words`` (whole words of the folded view) or of
    ``marks`` (substrings): a text with none of them is not searched, and most
    memories hold none (:func:`threat_rule` checks all rules' words at once).
    ``addressed`` rules match only a phrase that opens an instruction to the reader
    (see :func:`~memory_inject.stages._threat_view.addressed`); ``raw`` rules read
    the original text, case and all, instead of the folded view; ``unless`` is a
    phrase right after the match that makes it ordinary ("ignore any instructions
    *found in emails*"); ``narrated`` finds, in the original text (NFC, lower case),
    the phrases whose accent makes a match narration ("olvidé las instrucciones", *I
    forgot*, folds to the command "olvide las instrucciones"): that many matches opening
    with the same folded word are passed over.
    """

    id: str
    summary: str
    words: frozenset[str] = field(converter=_word_set)
    marks: tuple[str, ...]
    pattern: re.Pattern[str]
    addressed: bool = False
    raw: bool = False
    unless: re.Pattern[str] | None = None
    narrated: re.Pattern[str] | None = None

    def matches(self, raw: str, view: str, original: str | None = None) -> bool:
        """True when the rule flags a text (``view`` is its :func:`fold`, ``raw`` the same
        with its case kept, ``original`` the text as written when that differs)."""
        text = raw if self.raw else view
        told = self._narrations(raw if original is None else original)
        for m in self.pattern.finditer(text):
            if told and (phrase := " ".join(m.group().split())) in told:
                told[phrase] -= 1
                if not told[phrase]:
                    del told[phrase]
                continue
            # Chinese and Japanese phrasings carry no word boundaries to read: taken as found.
            if self.addressed and text[m.start()].isascii() and not addressed(text, m.start()):
                continue
            if (
                self.unless is not None
                and self.unless.match(text, m.end()) is not None
                and _ORDERS.search(m.group()) is None
            ):
                continue
            return True
        return False

    def _narrations(self, raw: str) -> dict[str, int]:
        """How many of :attr:`narrated`'s phrases the text holds, by the folded phrase: a
        match is passed over only when it is that very phrase ("olvide las ...")."""
        if self.narrated is None or raw.isascii():
            return {}
        told: dict[str, int] = {}
        for m in self.narrated.finditer(unicodedata.normalize("NFC", raw).lower()):
            phrase = " ".join(fold(m.group()).split())
            told[phrase] = told.get(phrase, 0) + 1
        return told


def _rx(pattern: str, flags: int = 0) -> re.Pattern[str]:
    return re.compile(pattern, flags)


#: Up to ``n`` words between two parts of a phrase.
def _gap(n: int) -> str:
    return rf"(?:[\w'\u2019-]+\s+){{0,{n}}}"


_OVERRIDE_VERB = r"(?:ignore|disregard|forget|override|bypass|dismiss|discard|abandon|neglect)"
# What makes "the instructions" the reader's own: "all", "previous", "above", "your", ...
_QUAL = (
    r"(?:all|any|every|previous|prior|preceding|above|earlier|former|original|initial|system"
    r"|safety|developer|hidden)"
)
_STRONG = r"(?:instructions?|prompts?|directives?|guidelines|guardrails|safeguards|programming)"
_WEAK = r"(?:rules|context|constraints|restrictions|polic(?:y|ies)|filters|commands|orders)"
_WEAK_QUAL = r"(?:previous|prior|preceding|above|earlier|system|safety|content|original|initial)"
# An override that names the reader's own orders is never spared by _DEFENSIVE.
_ORDERS = re.compile(
    r"\b(?:previous|prior|preceding|above|earlier|your|system|original|initial|developer)\b"
)
# "Ignore any instructions found in emails": a rule about untrusted text, not an attack.
_DEFENSIVE = _rx(
    r"\s+(?:that\s+(?:come|comes|appear|appears|arrive|arrives)\s+|you\s+(?:find|see|read)\s+)?"
    r"(?:in|from|found|inside|within|contained|embedded|hidden)\b\s+"
    + _gap(3)
    + r"(?:e-?mails?|web\s*(?:pages?|sites?)?|pages?|sites?|documents?|docs|files?|tools?|"
    r"tool\s+(?:results?|outputs?)|results?|content|pdfs?|attachments?|inputs?|strangers|"
    r"third[- ]part(?:y|ies)|untrusted|links?|urls?|images?|search)"
)
_AI_NAME = r"(?:chatgpt|gpt[\w.-]{0,40}|claude|gemini|grok|copilot|bard|llama|mistral)"
_NO_LIMITS = (
    r"(?:ethical\s+|moral\s+|safety\s+|content\s+)?(?:rules|restrictions|guidelines|filters"
    r"|limits|boundaries|censorship)"
)
_AI_ROLE = (
    rf"(?:ai|a\.i\.|chatbot|language\s+model|llm|{_AI_NAME}|dan|jailbroken|jailbreak"
    r"|unrestricted|unfiltered|uncensored|unaligned|unbound|amoral|evil\s+(?:ai|assistant|bot"
    r"|version|twin|mode)|developer\s+mode|(?:bound|restricted|limited)\s+by"
    r"|free\s+(?:from|of)\s+(?:all\s+|any\s+|your\s+)?(?:rules|restrictions|guidelines|filters)"
    r"|without\s+(?:any\s+)?(?:rules|restrictions|guidelines|filters|limits|censorship))"
)
_LEAK_VERB = (
    r"(?:reveal|print|output|repeat|display|leak|dump|disclose|recite|show|tell|share|give"
    r"|write\s+(?:out|down)|spell\s+out|copy|paste|send|list|expose|echo|return|provide)"
)
_HIDDEN_PROMPT = (
    r"(?:system\s+(?:prompt|message|instructions?)|initial\s+(?:prompt|instructions?)"
    r"|hidden\s+(?:prompt|instructions?)|original\s+(?:prompt|instructions?)"
    r"|secret\s+(?:prompt|instructions?)|pre-?prompt|developer\s+(?:message|prompt|instructions?)"
    r"|instructions\s+you\s+(?:were|have\s+been)\s+given|prompt\s+you\s+(?:were|have\s+been)"
    r"\s+given)"
)
_DATA = (
    r"(?:conversations?|chat\s+(?:history|logs?|transcripts?)|(?:message|chat)\s+history"
    r"|history|transcripts?|context|memor(?:y|ies)|system\s+prompt|instructions|api[\s_-]?keys?"
    r"|keys|credentials|passwords?|secrets?|tokens?|(?:user|users|user's|customer)\s+(?:data|"
    r"info(?:rmation)?|details|records)|personal\s+(?:data|info(?:rmation)?|details)"
    r"|env(?:ironment)?\s+variables|\.env\b|ssh\s+keys?|private\s+keys?|cookies|session\s+tokens?"
    r"|[~\w.$/-]*/(?:credentials|\.env|id_rsa|id_ed25519|\.netrc|\.pgpass)\b)"
)
_DESTINATION = r"(?:https?://|www\.|[\w.+-]+@[\w-]+(?:\.[\w-]+)+|webhook)"
_PLACEHOLDER = (
    r"(?:\{\{?\s*|\$\{?|<|\[|%7b)(?:conversation|chat|history|messages?|context|memor(?:y|ies)"
    r"|secrets?|passwords?|tokens?|api_?keys?|keys?|credentials?|user_?data|data|prompt"
    r"|system_?prompt|e-?mails?|summary|pii|cookies?|session)"
)
# An image's opening to its URL (a run stops at the next one, or reads 256: v2 read on).
_IMAGE = r"!\[[^\]\n]{0,100}\]\(\s*https?://"
_KEY_REF = r"\$\{?[a-z_]*(?:key|token|secret|password|credential|api)[a-z_]*"

#: The rule set (version :data:`RULESET_VERSION`), in the order a row is checked.
RULES: tuple[ThreatRule, ...] = (
    ThreatRule(
        "override_instructions",
        "tells the reader to ignore, forget or override its instructions",
        "ignore disregard forget override bypass dismiss discard abandon neglect disable "
        "deactivate remove drop turn ignoriere ignorieren ignora olvida olvide ignorez ignorer "
        "oublie oubliez oublier",
        ("忽略", "無視", "无视", "忘记", "忘記", "忘れ"),
        _rx(
            # "ignore all previous instructions", "disregard your guidelines"
            rf"\b{_OVERRIDE_VERB}\s+(?:all\s+|any\s+|each\s+|every\s+)?(?:of\s+)?"
            rf"(?:the\s+|these\s+|those\s+)?(?:{_QUAL}\s+){{1,3}}{_STRONG}\b"
            rf"|\b{_OVERRIDE_VERB}\s+(?:all\s+(?:of\s+)?)?your\s+(?:{_QUAL}\s+){{0,3}}{_STRONG}\b"
            # "ignore the previous rules", "forget your system context"
            rf"|\b{_OVERRIDE_VERB}\s+(?:all\s+(?:of\s+)?)?(?:the\s+|your\s+)?"
            rf"(?:{_WEAK_QUAL}\s+){{1,2}}{_WEAK}\b"
            # "ignore everything above", "forget everything you've been told"
            r"|\b(?:ignore|disregard|forget)\s+(?:everything|anything|all)\s+(?:written\s+|said\s+"
            r"|stated\s+)?above\b"
            r"|\b(?:ignore|disregard|forget)\s+(?:everything|anything|all|what)\s+(?:that\s+)?"
            r"you(?:'ve|\s+have|\s+were|\s+had)\s+(?:been\s+)?told\b(?!\s+about)"
            r"|\b(?:ignore|disregard)\s+everything\s+before\s+this\b"
            r"|\bsystem\s+prompt\s+override\b"
            # "disable your safety filters", "turn off your content policy"
            r"|\b(?:disable|turn\s+off|deactivate|remove|drop)\s+(?:all\s+)?your\s+"
            r"(?:(?:content|safety|ethical|moral)\s+)+(?:filters?|guardrails|guidelines"
            r"|restrictions|polic(?:y|ies)|checks|rules)\b"
            # German, Spanish, French: "ignore (all) previous instructions"
            r"|\bignorier(?:e|en\s+sie)\s+(?:alle\s+)?(?:vorherigen|bisherigen|obigen|vorigen)\s+"
            r"(?:anweisungen|instruktionen|befehle)\b"
            r"|\b(?:ignora|olvida|ignore|olvide|ignoren|olviden)\s+(?:todas\s+)?las\s+instrucciones\s+(?:anteriores"
            r"|previas)\b"
            r"|\b(?:ignore[rz]?|oublie[rz]?)\s+(?:toutes\s+)?les\s+instructions\s+(?:pr[ée]c[ée]dentes"
            r"|ci-dessus|ant[ée]rieures)"
            # Chinese: "(please) ignore (all) previous ...", only where the verb opens a clause
            # ("我经常忘记以前的事情", "别忘记之前买的牛奶", "老板让我忽略之前的指示": narration)
            rf"|{ZH_OPENS}(?:忽略|無視|无视|忘记|忘記|忘掉)(?:掉)?"
            r"(?:之前|以上|上面|先前|所有|以前|前面)"
            # Japanese: "ignore/forget the previous instructions" as a command ("前の指示を忘れた",
            # "I forgot ...", and "忘れないように", "so as not to forget ...", are narration)
            r"|(?:前|以前|これまで|上記)の(?:指示|命令|指令)を(?:すべて|全て)?"
            rf"(?:無視(?:して{JA_GOES_ON}|しろ|せよ|しなさい|すること|し(?=[、,])|(?=$|[、。,.!！\s]))"
            rf"|忘れ(?:て{JA_GOES_ON}|ろ|なさい|ること))"
        ),
        addressed=True,
        unless=_DEFENSIVE,
        # Spanish past tense: "olvidé / ignoré (todas) las instrucciones", I forgot / ignored.
        narrated=_rx(
            r"\b(?:olvidé|ignoré)\s+(?:todas\s+)?las\s+instrucciones\s+(?:anteriores|previas)\b"
        ),
    ),
    ThreatRule(
        "role_hijack",
        "tells the reader it is now another, unrestricted model",
        "now longer pretend act new mode restrictions filters guidelines policy policies ethical "
        "safety without rules limits boundaries censorship",
        ("你现在是", "你不再是", "あなたは"),
        _rx(
            rf"\b(?:you\s+are|you're|youre|u\s+r)\s+(?:now|no\s+longer)\s+"
            rf"(?:(?:a|an|the|in|called|named|operating\s+in|acting\s+as)\s+{_gap(2)})?{_AI_ROLE}"
            rf"|\bpretend\s+(?:to\s+be|(?:that\s+)?you\s+are|(?:that\s+)?you're)\s+"
            rf"(?:an?\s+|the\s+)?{_gap(2)}{_AI_ROLE}"
            rf"|\bact\s+as\s+(?:if\s+|though\s+)?(?:you\s+(?:are|were|have)\s+)?(?:an?\s+|the\s+)?"
            rf"(?:unrestricted|unfiltered|uncensored|jailbroken|unaligned|amoral|evil\s+\w+|dan\b"
            r"|no\s+(?:rules|restrictions|limits|filters|guidelines))"
            rf"|\b(?:ai|assistant|chatbot|bot|language\s+model|{_AI_NAME})\s+(?:with|that\s+has"
            rf"|which\s+has|who\s+has)\s+no\s+{_NO_LIMITS}\b"
            r"|\byour\s+new\s+(?:instructions|system\s+prompt|persona|identity|directives?)"
            r"\s+(?:is|are)\b"
            r"|\b(?:dan|jailbreak|jailbroken|unrestricted|unfiltered|uncensored)\s+mode\s+"
            r"(?:is\s+)?(?:now\s+)?(?:enabled|activated|on|engaged)\b"
            r"|\b(?:enable|activate|enter|switch\s+to)\s+(?:dan|jailbreak|jailbroken|unrestricted"
            r"|unfiltered|uncensored)\s+mode\b"
            r"|\bdan\b[^\n]{0,24}do\s+anything\s+now\b|\bdo\s+anything\s+now\b[^\n]{0,8}\bdan\b"
            r"|\byou\s+(?:have|possess)\s+no\s+(?:restrictions|filters|guidelines|content\s+polic"
            r"(?:y|ies)|ethical\s+(?:guidelines|constraints)|safety\s+(?:guidelines|rules))\b"
            r"|\b(?:respond|answer|reply)\s+without\s+(?:any\s+)?(?:restrictions|limitations"
            r"|filters|censorship|safety|ethical|moral)\b"
            r"|你现在是[^\n]{0,12}(?:ai|人工智能|没有任何限制|不受限制|dan)"
            r"|你不再是[^\n]{0,12}(?:ai|人工智能|助手)"
            r"|あなたは(?:今|これから)[^\n]{0,12}(?:ai|制限のない|dan)"
        ),
    ),
    ThreatRule(
        "prompt_leak",
        "asks the reader to reveal its system prompt or instructions",
        "prompt prompts instruction instructions message above",
        ("系统提示", "系統提示", "システムプロンプト"),
        _rx(
            rf"\b{_LEAK_VERB}\s+(?:me\s+|us\s+)?(?:all\s+(?:of\s+)?|back\s+)?"
            rf"(?:the\s+(?:contents?|text|words)\s+of\s+)?(?:your|the)\s+{_gap(2)}{_HIDDEN_PROMPT}\b"
            r"|\b(?:repeat|print|output|recite|echo)\s+(?:back\s+)?(?:all\s+)?(?:of\s+)?the\s+"
            r"(?:text|words|content|lines?|messages?|instructions|prompt)\s+(?:written\s+)?above\b"
            r"|\bwhat\s+(?:is|are|was|were)\s+your\s+(?:system\s+prompt|initial\s+instructions"
            r"|original\s+instructions|hidden\s+instructions|secret\s+instructions)\b"
            r"|(?:显示|打印|泄露|告诉我|輸出|输出|顯示|洩露)(?:你的)?(?:系统提示|系統提示)"
            r"|システムプロンプトを(?:表示|教え|出力)"
        ),
        addressed=True,
    ),
    ThreatRule(
        "role_tag",
        "forges a chat-template role marker (ChatML, Llama, Alpaca, a system header or tag)",
        "start_of_turn end_of_turn inst sys system system_prompt sys_prompt developer instruction "
        "response",
        ("<|",),
        _rx(
            r"<\|\s*(?:im_start|im_end|im_sep|system|user|assistant|developer|tool|function"
            r"|endoftext|eot_id|start_header_id|end_header_id|begin_of_text|end_of_turn"
            r"|start_of_turn|python_tag|eom_id)\s*\|>"
            r"|</?(?:start_of_turn|end_of_turn)>|\[/?inst\]|<</?sys>>"
            # a <system> element with its close, or a system tag opening a line
            r"|<(system|system[_-]prompt|sys_prompt)>[\s\S]{0,2000}?</\1>"
            r"|(?:^|\n)[ \t]*</?(?:system|system[_-]prompt|sys_prompt)>"
            r"|(?:^|\n)[ \t]*(?:#{1,6}[ \t]*(?:system|developer)(?:[ \t]+(?:prompt|message"
            r"|instructions?|override))?[ \t]*:|\[(?:system|developer)(?:[ \t]+(?:prompt|message"
            r"|note|instructions?|override))?\]|#{3}[ \t]*system[ \t]*#{3}"
            r"|#{3}[ \t]*(?:instruction|response)[ \t]*:)"
        ),
    ),
    ThreatRule(
        "system_header",
        "an upper-case SYSTEM: line, SYSTEM OVERRIDE or [ADMIN OVERRIDE], as injected text writes",
        "",
        ("SYSTEM", "ADMIN", "DEVELOPER", "ROOT", "SUDO"),
        _rx(
            r"(?:^|\n)[ \t]*SYSTEM(?:[ \t]*(?:PROMPT|MESSAGE|NOTE))?[ \t]*:"
            r"|\bSYSTEM[ \t]+OVERRIDE\b"
            r"|\b(?:NEW|UPDATED|REAL|ACTUAL)[ \t]+SYSTEM[ \t]+(?:PROMPT|INSTRUCTIONS?|MESSAGE)\b"
            r"|\[(?:ADMIN|SYSTEM|DEVELOPER|ROOT|SUDO)[ \t]+(?:OVERRIDE|MODE|ACCESS|COMMAND|MESSAGE"
            r"|NOTE)\]"
        ),
        raw=True,
    ),
    ThreatRule(
        "tool_call",
        "imitates a tool or function call of the model",
        "tool_call tool_calls tool_use function_call function_calls functioncall invoke function "
        "arguments",
        (),
        _rx(
            r"</?(?:tool_calls?|tool_use|function_calls?|functioncall|antml:invoke)\b[^>\n]{0,100}>"
            r"|<invoke\s+name\s*=|<function\s*=\s*[\w.-]+\s*>"
            r'|"(?:tool_calls|function_call|tool_use)"\s*:'
            r'|"type"\s*:\s*"(?:tool_use|tool_call|function_call)"'
            r'|\{\s*"name"\s*:\s*"[^"\n]{1,64}"\s*,\s*"arguments"\s*:'
        ),
    ),
    ThreatRule(
        "exfiltration",
        "tells the reader to send the conversation, secrets or user data somewhere",
        "http https www webhook",
        ("@",),
        _rx(
            r"\b(?:send|forward|post|upload|transmit|e-?mail|mail|leak|exfiltrate|submit|beam)\s+"
            rf"(?:me\s+)?{_gap(4)}{_DATA}[^\n]{{0,80}}?\b(?:to|at|into|via)\s+{_DESTINATION}"
            rf"|{_IMAGE}(?:(?:(?!{_IMAGE})[^)\s])*|[^)\s]{{0,256}})[?&/=]{_PLACEHOLDER}"
        ),
        addressed=True,
    ),
    ThreatRule(
        "hidden_instruction",
        "an HTML comment or hidden element that talks to the model",
        "style",
        ("<!--",),
        _rx(
            r"<!--(?:(?!<!--)[^>]){0,200}?\b(?:ignore|disregard|instructions?|system\s+prompt"
            r"|system\s*:|assistant|you\s+are|ai\s+model|language\s+model)[^>]{0,200}?-->"
            r"|<\s*(?:div|span|p)\s+style\s*=\s*[\"'][^>]{0,200}(?:display\s*:\s*none"
            r"|font-size\s*:\s*0)"
        ),
    ),
    # zeroclaw's own scan (threat.rs, scope "on"), tightened where noted in docs/pipeline.md.
    ThreatRule(
        "exfil_curl",
        "curl with a credential variable",
        "curl",
        (),
        _rx(rf"\bcurl\b[^\n]{{0,256}}{_KEY_REF}"),
    ),
    ThreatRule(
        "exfil_wget",
        "wget with a credential variable",
        "wget",
        (),
        _rx(rf"\bwget\b[^\n]{{0,256}}{_KEY_REF}"),
    ),
    ThreatRule(
        "read_secrets",
        "reads a credential file (.env, .netrc, .pgpass, .npmrc, an SSH key)",
        "env netrc pgpass npmrc id_rsa id_ed25519",
        (),
        _rx(
            r"\b(?:cat|less|more|tail|head|type|strings)\s+(?:-[\w-]+(?:\s+\d+)?\s+){0,4}"
            r"[\w~./$-]{0,200}(?:\.env(?![\w.])|\.netrc\b|\.pgpass\b|\.npmrc\b|id_rsa\b"
            r"|id_ed25519\b)"
        ),
    ),
    ThreatRule(
        "send_to_url",
        "a URL whose query carries a credential variable",
        "",
        ("$",),
        _rx(rf"https?://(?:(?!https?://)[^\s'\"<>])*[?&#][\w.-]*=\s*{_KEY_REF}"),
    ),
    ThreatRule(
        "agent_config_mod",
        "tells the reader to rewrite the agent's instruction files",
        "agents claude cursorrules clinerules",
        (),
        _rx(
            r"\b(?:write|append|modify|edit|overwrite|replace)\b[^\n]{0,80}"
            r"\b(?:agents\.md|claude\.md|\.cursorrules|\.clinerules)"
        ),
        addressed=True,
    ),
    ThreatRule(
        "hardcoded_secret",
        "an inline credential (key = '...')",
        "api api_key apikey secret token password credential",
        (),
        _rx(
            r"\b(?:api[_-]?key|secret|token|password|credential)\s*[:=]\s*['\"]"
            r"[a-z0-9_./+=-]{16,}['\"]"
        ),
    ),
    ThreatRule(
        "private_key",
        "a private key block",
        "private",
        (),
        _rx(r"-----begin [a-z ]*private key-----"),
    ),
)

if tuple(r.id for r in RULES) != THREAT_RULE_IDS:  # pragma: no cover - a development error
    raise RuntimeError("stages.threat.RULES and config THREAT_RULE_IDS differ")
