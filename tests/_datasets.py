"""The csvs of ../shared/data/README.md with their natural keys (and weights where it names them)."""

DATASETS = [
    ("sdcmicro/testdata.csv", ["urbrur", "roof", "walls", "water", "electcon", "relat", "sex", "age"],
     "sampling_weight"),
    ("sdcmicro/testdata2.csv", ["urbrur", "roof", "walls", "water", "electcon", "relat", "sex", "age"],
     "sampling_weight"),
    ("sdcmicro/francdat.csv", ["Key1", "Key2", "Key3", "Key4"], "w"),
    ("sdcmicro/free1.csv", ["REGION", "SEX", "AGE", "MARSTAT", "KINDPERS", "ETNI"], "WEIGHT"),
    ("arx/adult.csv", ["sex", "age", "race", "marital-status", "education", "native-country",
                       "workclass", "occupation"], None),
    ("uci_adult/adult_full_48842.csv", ["sex", "age", "race", "marital-status", "education",
                                        "native-country", "workclass", "occupation"], None),
    ("arx_genetic/fars_int.csv", ["iage", "irace", "ideathmon", "ideathday", "isex", "ihispanic",
                                  "istatenum", "iinjury"], None),
    ("arx_genetic/cup_int.csv", ["ZIP", "AGE", "GENDER", "INCOME", "STATE", "RAMNTALL", "NGIFTALL",
                                 "MINRAMNT"], None),
    ("arx_genetic/mach2019_int.csv", ["age", "familysize", "gender", "married", "race", "religion"],
     None),
    ("arx_bench/cup.csv", ["ZIP", "AGE", "GENDER", "INCOME", "STATE", "RAMNTALL", "NGIFTALL",
                           "MINRAMNT"], None),
    ("arx_bench/fars_subset.csv", ["iage", "irace", "ideathmon", "ideathday", "isex", "ihispanic",
                                   "istatenum", "iinjury"], None),
]
IDS = [d[0] for d in DATASETS]
