"""The time-expression rules: each a regex, the words that gate it and the resolver that turns
its match into dates. ``find_time_expressions`` (memlane/temporal/parse.py) runs them."""

from __future__ import annotations

import re
from dataclasses import dataclass

from . import periods as P
from .resolvers import (
    Resolver,
    resolve_ago,
    resolve_anchored,
    resolve_before_after,
    resolve_before_last,
    resolve_day_month,
    resolve_day_of_month,
    resolve_decade,
    resolve_holiday,
    resolve_in_offset,
    resolve_month_ctx,
    resolve_month_rel,
    resolve_month_span,
    resolve_month_year,
    resolve_numeric,
    resolve_relday,
    resolve_relunit,
    resolve_rolling,
    resolve_season_ctx,
    resolve_season_rel,
    resolve_season_year,
    resolve_the_weekend,
    resolve_this_time,
    resolve_vague,
    resolve_weekday,
    resolve_year,
    resolve_year_span,
)
from .vocabulary import (
    DAY_ENDS,
    DIGITS,
    HOLIDAYS,
    MAY_ENDS,
    MONTH_ANY,
    MONTH_FULL,
    MONTH_WORDS,
    NO_EVENT_AFTER,
    NOT_POSS,
    NOT_QUANTITY,
    NUM,
    OFFSET_WORDS,
    ORDINAL_WORDS,
    REL,
    SEASON,
    SEASON_WORDS,
    UNIT_WORDS,
    WEEKDAY,
    WEEKDAY_ABBR,
    YEAR,
    YEAR_EXPLICIT,
)


class Renamed:
    """A match whose alternative groups ("dir2", "unit2", "y1b") answer under the main name, so one
    resolver serves every alternative of a rule."""

    _ALIASES = {"dir": "dir2", "unit": "unit2", "y1": "y1b", "y2": "y2b"}

    def __init__(self, m: re.Match):
        self._m = m
        self.re = m.re

    def __getitem__(self, name: str):
        value = self._m[name] if name in self._m.re.groupindex else None
        alias = self._ALIASES.get(name)
        if value is None and alias is not None and alias in self._m.re.groupindex:
            value = self._m[alias]
        return value


@dataclass(frozen=True)
class Rule:
    """A regex, the words that gate it (one of a set; one of each set for a tuple of sets;
    DIGITS: a digit) and the resolver of its matches."""

    name: str
    regex: re.Pattern
    triggers: frozenset | tuple[frozenset, ...] | str
    resolve: Resolver
    anchored: bool = False


def _rule(name, pattern, triggers, resolve, anchored=False):
    if isinstance(triggers, str) and triggers != DIGITS:
        triggers = frozenset(triggers.split())
    return Rule(name, re.compile(pattern, re.IGNORECASE), triggers, resolve, anchored)


RULES: tuple[Rule, ...] = (
    _rule(
        "relative_day",
        r"\b(?P<w>the\s+day\s+before\s+yesterday|the\s+day\s+after\s+tomorrow|yesterday|today|"
        r"tonight|tonite|tomorrow|tmrw|last\s+night|this\s+(?:morning|afternoon|evening))\b"
        r"(?:\s+(?:morning|afternoon|evening|night)\b)?",
        "yesterday today tonight tonite tomorrow tmrw night morning afternoon evening",
        resolve_relday,
    ),
    _rule(
        "ago",
        rf"\b(?P<n>{NUM})\s+(?P<unit>hour|day|week|fortnight|month|year|decade)s?"
        rf"(?:\s+or\s+(?P<n2>{NUM}|so))?\s+(?:ago|back)\b",
        "ago back",
        resolve_ago,
    ),
    _rule(
        "in_offset",  # in four days / in a fortnight / in a couple of weeks' time
        # (not "in just 30 days", "in 16 months", "In Five Years": durations and titles)
        rf"\bin\s+(?:(?:about|around|roughly|another)\s+)?(?P<n>{NUM})\s+"
        r"(?P<unit>day|week|fortnight)s?\b(?:['’]?\s+time\b)?(?!\s+(?:of|ago|back)\b)",
        (OFFSET_WORDS, frozenset({"in"})),
        resolve_in_offset,
    ),
    _rule(
        "from_now",  # two weeks from now / ten days from today
        rf"\b(?P<n>{NUM})\s+(?P<unit>day|week|fortnight)s?\s+from\s+(?:now|today)\b",
        (OFFSET_WORDS, frozenset({"from"}), frozenset({"now", "today"})),
        resolve_in_offset,
    ),
    _rule(
        "rolling",
        rf"\b(?:(?:the\s+)?(?:past|last)\s+(?P<n>{NUM})\s+|(?:the\s+)?past\s+|the\s+last\s+)"
        r"(?P<unit>day|week|month|year)s?\b(?!\s+of\b)",
        "past last",
        resolve_rolling,
    ),
    _rule(
        "relative_unit",
        rf"{NOT_POSS}\b{REL}\s+(?P<unit>weekend|week|month|year)\b(?!\s+of\b)",
        UNIT_WORDS,
        resolve_relunit,
    ),
    _rule(
        "before_last",
        r"\bthe\s+(?P<unit>weekend|week|month|year)\s+(?P<dir>before\s+last|after\s+next)\b",
        UNIT_WORDS,
        resolve_before_last,
    ),
    _rule(
        "this_time",
        r"\bthis\s+time\s+(?P<rel>last|next)\s+(?P<unit>week|month|year)\b",
        "time",
        resolve_this_time,
    ),
    _rule(
        "weekday",
        rf"{NOT_POSS}\b(?:{REL}\s+)?(?<!\bevery\s)(?P<wd>{WEEKDAY})\b(?!\s+of\b)"
        r"(?:\s+(?:morning|afternoon|evening|night)\b)?",
        " ".join(P.WEEKDAYS),
        resolve_weekday,
    ),
    _rule(
        "the_weekend",
        r"\b(?:over|on|during|at|for|after|before|since)\s+(?P<b>the\s+weekend)\b",
        "weekend",
        resolve_the_weekend,
    ),
    _rule(
        "day_month",  # 8 May, 2023 / the 27th of June / Friday, 5 May
        rf"\b(?:(?P<wd>{WEEKDAY})\s*,?\s+)?(?:the\s+)?(?P<day>[0-3]?\d)(?:st|nd|rd|th)?\s+(?:of\s+)?"
        rf"(?P<mon>{MONTH_ANY})(?:\s*,?\s*(?P<year>{YEAR_EXPLICIT})\b)?",
        MONTH_WORDS,
        resolve_day_month,
    ),
    _rule(
        "month_day",  # May 8th / June 27, 2023 / Friday, May 5
        rf"\b(?:(?P<wd>{WEEKDAY})\s*,?\s+)?(?P<mon>{MONTH_ANY})\s+(?:the\s+)?(?P<day>[0-3]?\d)"
        rf"(?:st|nd|rd|th)?\b(?:\s*,?\s*(?P<year>{YEAR_EXPLICIT})\b)?",
        MONTH_WORDS,
        resolve_day_month,
    ),
    _rule(
        # the 5th of may / may 5th / 3rd march: "may" and "march" in lower case are months only
        # next to an ordinal day, and "may" not before a verb ("the 5th may be fine")
        "day_month_lower",
        rf"\b(?:(?P<wd>{WEEKDAY})\s*,?\s+)?(?:the\s+)?(?P<day>[0-3]?\d)(?:st|nd|rd|th)\s+(?:of\s+)?"
        rf"(?P<mon>may|march){MAY_ENDS}(?:\s*,?\s*(?P<year>{YEAR_EXPLICIT})\b)?",
        (frozenset({"may", "march"}), ORDINAL_WORDS),
        resolve_day_month,
    ),
    _rule(
        "month_day_lower",
        rf"\b(?:(?P<wd>{WEEKDAY})\s*,?\s+)?(?P<mon>may|march)\s+(?:the\s+)?(?P<day>[0-3]?\d)"
        rf"(?:st|nd|rd|th)\b(?:\s*,?\s*(?P<year>{YEAR_EXPLICIT})\b)?",
        (frozenset({"may", "march"}), ORDINAL_WORDS),
        resolve_day_month,
    ),
    _rule(
        # the 9th / on the 12th / Thursday the 4th / Sat 28th: in the month the sentence means.
        # Not "the 3rd time", "in the 4th" (a quarter, a century), "the 17th and 18th centuries".
        "day_of_month",
        rf"(?:\b(?P<wd>{WEEKDAY}|{WEEKDAY_ABBR})\.?,?\s+(?:the\s+)?|(?<!\bin\s)\bthe\s+)"
        rf"(?P<day>[0-3]?\d)(?:st|nd|rd|th)\b(?:\s+of\s+(?P<rel>this|next|last)\s+month\b|(?(wd)|{DAY_ENDS}))"
        r"(?![^.!?]{0,30}\bcentur)",
        ORDINAL_WORDS,
        resolve_day_of_month,
    ),
    _rule(
        "month_year",  # May 2023 / May of 2023
        rf"\b(?P<mon>{MONTH_ANY})\s*,?\s+(?:of\s+)?(?P<year>{YEAR_EXPLICIT})\b",
        MONTH_WORDS,
        resolve_month_year,
    ),
    _rule(
        "month_span",  # from March to May (2023)
        rf"\b(?:from|between)\s+(?P<b>(?P<m1>{MONTH_FULL})\s+(?:to|and|until|till|through)\s+"
        rf"(?P<m2>{MONTH_FULL})(?:\s*,?\s*(?P<year>{YEAR_EXPLICIT})\b)?)",
        MONTH_WORDS,
        resolve_month_span,
    ),
    _rule(
        "month_relative",  # last May / this June / next March
        rf"{NOT_POSS}\b{REL}\s+(?P<mon>{MONTH_FULL})",
        MONTH_WORDS,
        resolve_month_rel,
    ),
    _rule(
        "month_in_context",  # in May / since June / early March / the end of April
        r"\b(?P<ctx>in|since|during|until|till|by|before|after|from|through|throughout|around|"
        r"early|late|mid|of|for)[\s-]+"
        rf"(?P<b>(?P<mon>{MONTH_ANY}))",
        MONTH_WORDS,
        resolve_month_ctx,
    ),
    _rule(
        "numeric_date",  # 2023-05-08, 2023/05/08, 5/8/2023, 08.05.2023
        r"(?<![\d/.\-])(?:(?P<iy>\d{4})(?P<sep>[-/.])(?P<im>\d{1,2})(?P=sep)(?P<id>\d{1,2})|"
        r"(?P<a>\d{1,2})/(?P<b2>\d{1,2})/(?P<c>\d{4}|\d{2})|"
        r"(?P<ed>\d{1,2})\.(?P<em>\d{1,2})\.(?P<ey>\d{4}))(?![\d/]|\.\d)",
        DIGITS,  # (the second number is "b2": the group name "b" marks span bodies)
        resolve_numeric,
    ),
    _rule(
        "year_span",  # from 2019 to 2021 / between 2019 and 2021 / 2019-2021
        rf"\b(?:(?:from|between)\s+(?P<y1>{YEAR})\s*(?:to|and|until|till|through|-|–|—)\s*"
        rf"(?P<y2>{YEAR})|(?P<y1b>{YEAR})\s*[-–—]\s*(?P<y2b>{YEAR}))\b",
        DIGITS,
        lambda m, ref, d, a, t: resolve_year_span(Renamed(m), ref, d, a, t),
    ),
    _rule(
        "year_in_context",  # in 2022 / since 2019 / back in 2010 / mid-2022 / the end of 2021
        r"\b(?:(?:ever\s+)?since|in\s+the\s+year|back\s+in|in|during|until|till|by|before|"
        r"after|from|through|throughout|of|circa|around|early|late|mid)[\s-]+"
        rf"(?P<b>(?P<y>{YEAR}))\b(?![,.]\d){NOT_QUANTITY}",
        DIGITS,
        resolve_year,
    ),
    _rule(
        "decade",  # the 1990s / the '90s / the early 2000s
        r"\b(?P<c>(?:19|20)\d0)['’]?s\b|\bthe\s+(?:(?:early|late|mid)[\s-]+)?(?P<b>(?P<s>['’]?\d0)s)\b",
        DIGITS,
        resolve_decade,
    ),
    _rule(
        "season_year",  # summer 2022 / fall of 2019 / summer '22
        rf"\b(?P<s>{SEASON})\s*,?\s+(?:of\s+)?(?:(?P<y>{YEAR})|['’](?P<y2>\d\d))\b",
        SEASON_WORDS,
        resolve_season_year,
    ),
    _rule(
        "season_relative",  # last summer / this winter / next spring / this past fall
        rf"{NOT_POSS}\b{REL}\s+(?P<s>{SEASON})\b(?!\s+of\s+(?!['’]?\d))",
        SEASON_WORDS,
        resolve_season_rel,
    ),
    _rule(
        "season_in_context",  # in the summer / during winter / all summer / the end of summer
        r"\b(?:in|during|over|through|throughout|since|until|till|by|all|for|early|late|mid|"
        r"(?:beginning|start|end|middle)\s+of)[\s-]+(?:the\s+)?(?:(?:early|late|mid)[\s-]+)?"
        rf"(?P<b>(?P<s>{SEASON}))\b(?!\s+of\s+(?!['’]?\d))",
        SEASON_WORDS,
        resolve_season_ctx,
    ),
    _rule(
        "holiday",  # on Christmas / last Thanksgiving / Easter 2022 (a bare "Christmas" is not)
        r"\b(?:(?P<ctx>on|at|for|over|during|since|until|till|by|before|after|around|from|"
        r"through|in)\s+(?:the\s+)?)?"
        rf"(?P<b>(?:{REL}\s+)?(?P<h>{HOLIDAYS})(?:\s*,?\s+(?:of\s+)?(?P<y>{YEAR}))?)\b",
        "christmas xmas year years halloween thanksgiving easter valentine valentines july "
        "patrick patricks mother mothers father fathers",
        resolve_holiday,
    ),
    _rule(
        "vague",
        r"\b(?P<w>recently|lately|the\s+other\s+day)\b",
        "recently lately other",
        resolve_vague,
    ),
    _rule(
        # the day before / the week after / the Sunday before: relative to the previous
        # expression; or, with "tail", to the date that follows ("the week before 9 June
        # 2023", LoCoMo's answer style). Not "the day before my birthday".
        "anchored_the",
        rf"\bthe\s+(?P<unit>day|night|weekend|week|month|year|{WEEKDAY})\s+(?P<dir>before|after)\b"
        rf"(?:(?P<tail>\s+)(?=(?:the\s+)?\d|{MONTH_ANY}|{WEEKDAY}\b)|{NO_EVENT_AFTER})",
        "before after",
        resolve_before_after,
        anchored=True,
    ),
    _rule(
        "anchored_next",  # the next day / the following week / the previous month
        r"\bthe\s+(?:(?P<dir>following|previous|prior)\s+(?P<unit>day|morning|night|weekend|"
        r"week|month|year)|(?P<dir2>next)\s+(?P<unit2>day|morning|night))\b",
        "following previous prior next",
        lambda m, ref, d, a, t: resolve_anchored(Renamed(m), ref, d, a, t),
        anchored=True,
    ),
    _rule(
        "anchored_offset",  # two days later / a week earlier / three years before
        rf"\b(?P<n>{NUM})\s+(?P<unit>day|week|month|year)s?\s+"
        rf"(?:(?P<dir>later|earlier)\b|(?P<dir2>before|after)\b{NO_EVENT_AFTER})",
        "later earlier before after",
        lambda m, ref, d, a, t: resolve_anchored(Renamed(m), ref, d, a, t),
        anchored=True,
    ),
)
