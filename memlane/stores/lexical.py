"""The BM25 analyzer: lowercase word tokens minus English function words.

Without stop words, question words dominated BM25 on chat memories: "What pet did Noor adopt?"
ranked "Brilliant! What are you planting first?" first on 'what'. The list is explicit (not a
named set) because Milvus Lite only understands explicit lists, and a Milvus server accepts the
same parameters, so both backends tokenize alike. Negations ('not', 'never', 'no') and time
words ('first', 'last', 'before', 'after') are kept: they carry meaning in questions.
"""

STOP_WORDS = sorted(set("""
a an the and or but if then so than too very just also
i me my mine myself you your yours yourself he him his himself she her hers herself
it its itself we us our ours ourselves they them their theirs themselves
what which who whom whose when where why how
is am are was were be been being do does did doing done have has had having
will would shall should can could may might must
this that these those there here
of to in on at by for with from about into over under up down out off
as s t d ll m re ve don didn doesn isn wasn aren weren hasn haven hadn won wouldn couldn shouldn
some any each all both such own same other
again further once only
while until because through during
let lets get got gets oh ok okay yeah yes hey hi wow
""".split()))

ANALYZER_PARAMS = {"tokenizer": "standard",
                   "filter": ["lowercase", {"type": "stop", "stop_words": STOP_WORDS}]}
