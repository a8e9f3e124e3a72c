"""A small bank with a temporal tree, for the tests of the services around it (HTTP, MCP,
export and import, the doctor): turns of three sessions on three days in two ISO weeks, all
in the past, so consolidation closes every window."""

from __future__ import annotations

# 2024-05-06 is a Monday: sessions on Mon and Wed of week 19, and Tue of week 20.
TREE_ITEMS = [
    {
        "content": "Ana adopted a beagle called Pixel in Porto.",
        "speaker": "Ana",
        "session_id": "s1",
        "timestamp": "2024-05-06T09:00:00Z",
    },
    {
        "content": "Ben visited Ana in Porto to meet Pixel.",
        "speaker": "Ben",
        "session_id": "s1",
        "timestamp": "2024-05-06T09:05:00Z",
    },
    {
        "content": "Ana started a pottery class with Carla on Wednesdays.",
        "speaker": "Ana",
        "session_id": "s2",
        "timestamp": "2024-05-08T18:00:00Z",
    },
    {
        "content": "Carla said the kiln at the studio broke down.",
        "speaker": "Carla",
        "session_id": "s2",
        "timestamp": "2024-05-08T18:10:00Z",
    },
    {
        "content": "Ana booked a train to Lisbon for a conference on hydrology.",
        "speaker": "Ana",
        "session_id": "s3",
        "timestamp": "2024-05-14T08:30:00Z",
    },
    {
        "content": "Ben will look after Pixel while Ana is in Lisbon.",
        "speaker": "Ben",
        "session_id": "s3",
        "timestamp": "2024-05-14T08:40:00Z",
    },
]
# What consolidation makes of them: one node per session, day and week, and the profile.
TREE_SHAPE = {"session": 3, "day": 3, "week": 2, "profile": 1}
