"""The words a slot's value is made of, for the families whose values come from a closed-ish
list (diets, pets, cars, partners, jobs), and the words that say a sentence is about someone
else or about an activity rather than a job. The rules (memlane/facts/patterns.py) and the
learned extractor's value finder (memlane/facts/values.py) read these tables; none of them was
copied from the statement set.
"""

from __future__ import annotations

import re

# A diet as said -> the diet (the shortest natural name).
DIETS = {
    "vegan": "vegan",
    "vegetarian": "vegetarian",
    "veggie": "vegetarian",
    "pescatarian": "pescatarian",
    "pescetarian": "pescatarian",
    "plant-based": "plant-based",
    "plant based": "plant-based",
    "gluten-free": "gluten-free",
    "gluten free": "gluten-free",
    "coeliac": "gluten-free",
    "celiac": "gluten-free",
    "dairy-free": "dairy-free",
    "dairy free": "dairy-free",
    "lactose-free": "lactose-free",
    "lactose intolerant": "lactose-free",
    "lactose-intolerant": "lactose-free",
    "halal": "halal",
    "kosher": "kosher",
    "keto": "keto",
    "ketogenic": "keto",
    "paleo": "paleo",
    "low-carb": "low-carb",
    "low carb": "low-carb",
    "carnivore": "carnivore",
    "flexitarian": "flexitarian",
    "raw vegan": "raw vegan",
    "fruitarian": "fruitarian",
    "jain": "jain",
    "sugar-free": "sugar-free",
    "nut-free": "nut-free",
    "intermittent fasting": "intermittent fasting",
}
DIET_WORDS = "|".join(sorted(map(re.escape, DIETS), key=len, reverse=True))  # a regex alternation
DIET_RE = re.compile(r"\b(?:" + DIET_WORDS + r")\b", re.I)

# A pet as said -> the species (count:<thing> reads memlane/query/slot_words.py's COUNTABLE).
PETS = {
    "dog": "dog",
    "dogs": "dog",
    "puppy": "dog",
    "pup": "dog",
    "cat": "cat",
    "cats": "cat",
    "kitten": "cat",
    "kitty": "cat",
    "rabbit": "rabbit",
    "bunny": "rabbit",
    "hamster": "hamster",
    "guinea pig": "guinea pig",
    "gerbil": "gerbil",
    "ferret": "ferret",
    "parrot": "parrot",
    "budgie": "budgie",
    "parakeet": "parakeet",
    "cockatiel": "cockatiel",
    "canary": "canary",
    "tortoise": "tortoise",
    "turtle": "turtle",
    "snake": "snake",
    "python": "snake",
    "lizard": "lizard",
    "gecko": "gecko",
    "iguana": "iguana",
    "goldfish": "fish",
    "fish": "fish",
    "betta": "fish",
    "axolotl": "axolotl",
    "horse": "horse",
    "pony": "pony",
    "chinchilla": "chinchilla",
    "hedgehog": "hedgehog",
    "rat": "rat",
    "mouse": "mouse",
    "chicken": "chicken",
    "hen": "chicken",
    "goat": "goat",
    "labrador": "dog",
    "retriever": "dog",
    "spaniel": "dog",
    "terrier": "dog",
    "beagle": "dog",
    "poodle": "dog",
    "collie": "dog",
    "greyhound": "dog",
    "dachshund": "dog",
    "husky": "dog",
    "corgi": "dog",
    "pug": "dog",
    "tabby": "cat",
    "siamese": "cat",
    "persian": "cat",
    "maine coon": "cat",
}
_PET_PLURAL = {"puppies": "puppy", "bunnies": "bunny", "kitties": "kitty", "ponies": "pony", "mice": "mouse"}
PET_WORDS = "|".join(sorted(map(re.escape, [*PETS, *_PET_PLURAL]), key=len, reverse=True))  # an alternation
PET_RE = re.compile(r"\b(?P<pet>" + PET_WORDS + r")(?:e?s)?\b", re.I)


def pet_species(word: str) -> str | None:
    w = word.lower()
    w = _PET_PLURAL.get(w, w)
    if w in PETS:
        return PETS[w]
    for suffix in ("es", "s"):
        if w.endswith(suffix) and w[: -len(suffix)] in PETS:
            return PETS[w[: -len(suffix)]]
    return None


CAR_MAKES = (
    "Toyota Honda Nissan Mazda Subaru Mitsubishi Suzuki Lexus Hyundai Kia Ford Chevrolet Chevy "
    "Dodge Jeep Tesla Volkswagen VW Audi BMW Mercedes Porsche Opel Vauxhall Peugeot Renault Citroen "
    "Citroën Dacia Fiat Alfa Seat Skoda Škoda Volvo Saab Mini Jaguar Land Rover Range Rover Lada "
    "Tata Mahindra Maruti Proton Perodua BYD Geely Chery MG Polestar Rivian Cupra Lancia Smart "
    "Infiniti Acura Cadillac Buick GMC Ram Holden Daihatsu Isuzu Ssangyong Genesis Lotus Ferrari"
).split()
CAR_MODELS = (
    "Corolla Yaris Prius Camry RAV4 Hilux Civic Jazz Fit CR-V Accord Golf Polo Passat Tiguan Beetle "
    "Fiesta Focus Mondeo Ranger Mustang Clio Megane Mégane Twingo Zoe Duster Sandero Logan Panda "
    "Punto Ibiza Leon Octavia Fabia Corsa Astra Micra Leaf Qashqai Navara Outback Forester Impreza "
    "Swift Alto Jimny Vitara Ioniq Kona Tucson i10 i20 i30 Picanto Sportage Niro Model-3 Wrangler "
    "Transit Sprinter Berlingo Kangoo Defender Discovery Cooper Miata MX-5 Pajero Lancer Outlander "
    "Land-Cruiser Tacoma Tundra F-150 Silverado Hiace Innova Fortuner Vios Swift Baleno Cayenne"
).split()
_CAR_WORDS = sorted(
    {w.replace("-", " ") for w in (*CAR_MAKES, *CAR_MODELS)} | set(CAR_MODELS), key=len, reverse=True
)
# A make or model and up to two words of model name after it ("Volvo XC40 Recharge").
CAR_NAMES = r"(?:" + "|".join(map(re.escape, _CAR_WORDS)) + r")"  # an alternation
CAR_TAIL = r"(?:[ -](?:[A-Z0-9][\w-]*|[a-z]?\d[\w-]*)){0,2}"  # case-sensitive: "XC40 Recharge", "3 Series"
CAR_PATTERN = CAR_NAMES + CAR_TAIL
CAR_RE = re.compile(r"\b(?P<car>" + CAR_PATTERN + r")\b")

# A partner word -> the relationship status it says (label values: "married to X", "dating X").
PARTNERS = {
    "wife": "married",
    "husband": "married",
    "spouse": "married",
    "fiancée": "engaged",
    "fiancee": "engaged",
    "fiancé": "engaged",
    "fiance": "engaged",
    "girlfriend": "dating",
    "boyfriend": "dating",
    "partner": "partner",
}
STATUSES = ("married", "engaged", "divorced", "separated", "widowed", "single", "dating", "seeing")

# Other people a sentence may be about: "my sister got a job at ..." is not the speaker's job.
OTHERS = (
    "mother mom mum mam mama mommy father dad papa daddy parents parent sister sisters brother "
    "brothers sibling siblings cousin cousins aunt uncle niece nephew grandma grandmother grandpa "
    "grandfather granny gran nan son sons daughter daughters kid kids child children baby friend "
    "friends mate mates pal buddy bestie colleague colleagues coworker co-worker coworkers boss "
    "manager neighbour neighbor neighbours neighbors roommate flatmate housemate wife husband "
    "partner girlfriend boyfriend fiance fiancé fiancee fiancée ex team classmate teacher "
    "in-laws stepmom stepdad stepmother stepfather stepson stepdaughter flatmates landlord"
).split()
OTHERS_RE = re.compile(
    r"\b(?:my|our|his|her|their)\s+(?:\w+\s+)?(?:" + "|".join(map(re.escape, OTHERS)) + r")\b", re.I
)

# Nouns after a capitalised word that make it a subject of study or an activity, not an
# organisation or place: "Japanese lessons", "Salsa class", "Python course".
ACTIVITY_NOUNS = (
    "lesson lessons class classes course courses club clubs team league lessons workshop workshops "
    "choir band group meetup meetups sessions session training practice tutoring tutor tutorials "
    "evening evenings night nights gym yoga pilates dance dancing swimming tuition programme program"
).split()

# Head nouns of job titles (value finder for job_title: a noun chunk ending in one of these).
JOB_NOUNS = frozenset(
    (
        "accountant actor actress administrator adviser advisor agent analyst anaesthetist "
        "anesthetist apprentice architect artist assistant associate attendant auditor baker "
        "barista bartender barber beautician bookkeeper builder butcher buyer carer caretaker "
        "carpenter cashier chef chemist cleaner clerk coach consultant controller cook coordinator "
        "copywriter counsellor counselor courier curator dentist designer detective developer "
        "dietitian director dispatcher doctor driver economist editor electrician engineer "
        "estimator executive farmer firefighter founder gardener geologist guard guide hairdresser "
        "handyman head hygienist illustrator inspector instructor intern interpreter investigator "
        "janitor journalist judge labourer laborer lawyer lecturer librarian lifeguard machinist "
        "manager marketer mechanic medic midwife miner musician nanny navigator nurse officer "
        "operator optician optometrist organiser organizer painter paralegal paramedic pastor "
        "pharmacist photographer physician physio physiotherapist pilot planner plumber "
        "podiatrist policeman postman priest principal producer professor programmer psychiatrist "
        "psychologist publicist radiographer receptionist recruiter representative rep researcher "
        "salesman saleswoman scientist secretary server sommelier specialist statistician steward "
        "stewardess strategist supervisor surgeon surveyor tailor teacher technician technologist "
        "tester therapist trainer translator tutor veterinarian vet waiter waitress welder writer "
        "zookeeper ceo cto cfo coo vp lead partner owner housekeeper dev sysadmin porter sous "
        "foreman miner fisherman crew doula lineman roofer tiler plasterer glazier locksmith "
        "upholsterer"
    ).split()
)
