"""Query analysis: the words, names and cues of a recall query, worked out once per recall
(:func:`~memlane.query.analysis.analyse`) and read by every stage (recall's channels and
abstention, decomposition, the tree's planner, the facts' ordering). It sits below recall,
tree and facts and imports none of them."""
