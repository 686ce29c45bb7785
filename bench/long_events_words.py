"""The words of bench/long_events_data.py's generated agent runs: services, hosts, companies,
products, settings, the facts that can be planted and the questions that ask for them (direct
and paraphrased), the prose an assistant writes. Made up for the benchmark; nothing copied.
"""

from __future__ import annotations

# service -> how a person would name it
SERVICES = {
    "payment-service": "payments backend",
    "checkout-api": "checkout front end",
    "inventory-sync": "stock synchroniser",
    "auth-gateway": "login gateway",
    "search-indexer": "search indexing job",
    "email-dispatcher": "outgoing mail worker",
    "ledger-writer": "accounting ledger writer",
    "shipping-quotes": "carrier rate calculator",
    "pricing-engine": "price computation service",
    "image-resizer": "thumbnail generator",
    "notification-hub": "push notification sender",
    "report-builder": "nightly reporting job",
}
HOST_KINDS = ("db", "web", "cache", "worker", "queue", "edge", "batch")
LEVELS = ("INFO", "INFO", "INFO", "INFO", "DEBUG", "DEBUG", "WARN", "ERROR")
PATHS = (
    "/api/cart", "/api/orders", "/api/users/me", "/api/products", "/healthz", "/api/invoices",
    "/api/shipments", "/metrics", "/api/search", "/api/coupons",
)  # fmt: skip
TABLES = ("orders", "order_lines", "customers", "invoices", "shipments", "products", "sessions")
TOPICS = ("order-events", "invoice-events", "stock-changes", "audit-log", "email-outbox")
SYLLABLES = (
    "hal", "vor", "sen", "ok", "a", "for", "lind", "qvist", "mar", "tel", "bri", "gan", "ko",
    "wal", "ski", "ber", "na", "do", "ri", "tan", "vel", "mo", "ro", "sa", "ki", "den", "lu",
)  # fmt: skip
COMPANY_KINDS = (
    "Marine", "Logistics", "Foods", "Textiles", "Robotics", "Pharma", "Outdoor", "Print",
    "Dental", "Timber", "Optics", "Bakery", "Freight", "Studios", "Motors", "Ceramics",
)  # fmt: skip
FIRST_NAMES = (
    "Amara", "Bruno", "Chiara", "Dmitri", "Elif", "Farah", "Goran", "Hana", "Ivo", "Jonas",
    "Keiko", "Lena", "Mateo", "Nadia", "Oskar", "Priya", "Quentin", "Rosa", "Soren", "Tomas",
)  # fmt: skip
LAST_NAMES = (
    "Okafor", "Lindqvist", "Moreau", "Tanaka", "Novak", "Silva", "Haddad", "Kowalski",
    "Byrne", "Rossi", "Varga", "Nguyen", "Castillo", "Jensen", "Petrov", "Adeyemi",
)  # fmt: skip
CITIES = {
    "Porto": "PT", "Lyon": "FR", "Gdansk": "PL", "Valencia": "ES", "Leipzig": "DE",
    "Tampere": "FI", "Graz": "AT", "Cork": "IE", "Brno": "CZ", "Utrecht": "NL", "Bergen": "NO",
    "Malmo": "SE", "Turin": "IT", "Ghent": "BE", "Aarhus": "DK", "Ljubljana": "SI",
}  # fmt: skip
CURRENCIES = ("EUR", "EUR", "EUR", "GBP", "SEK", "NOK", "DKK", "PLN", "CZK")
CARRIERS = ("DHL", "UPS", "GLS", "DPD", "PostNord", "Correos")
SHIP_STATUSES = ("in_transit", "delivered", "out_for_delivery", "label_created", "returned")
INVOICE_STATUSES = ("paid", "open", "overdue", "void", "draft")
ADJECTIVES = (
    "stainless", "bamboo", "ceramic", "insulated", "folding", "cordless", "waterproof",
    "compact", "enamel", "woollen", "recycled", "adjustable",
)  # fmt: skip
NOUNS = (
    "kettle", "cutting board", "travel mug", "desk lamp", "hiking backpack", "bike pump",
    "yoga mat", "garden hose", "rain jacket", "pepper grinder", "laundry basket", "tent",
)  # fmt: skip
WAREHOUSES = ("Rotterdam", "Hamburg", "Milan", "Lodz", "Zaragoza", "Dublin", "Vienna", "Lille")
REGIONS = ("north-eu", "south-eu", "west-eu", "central-eu", "nordics", "uk-ie", "iberia")
# setting -> (what it means, low, high, step)
SETTINGS = {
    "RETRY_BACKOFF_MS": ("the delay between two retries", 150, 5000, 50),
    "MAX_POOL_SIZE": ("the largest number of open database connections", 12, 480, 4),
    "CACHE_TTL_SECONDS": ("how long a cached entry lives", 30, 86400, 30),
    "REQUEST_TIMEOUT_S": ("how long a request may take before it is abandoned", 3, 180, 1),
    "BATCH_SIZE": ("how many records go into one batch", 50, 20000, 50),
    "RATE_LIMIT_PER_MIN": ("how many calls a client may make each minute", 60, 12000, 20),
    "WORKER_CONCURRENCY": ("how many workers run in parallel", 2, 96, 1),
    "SESSION_EXPIRY_HOURS": ("how long a login stays valid", 1, 720, 1),
    "MAX_UPLOAD_MB": ("the biggest file a user may upload", 5, 2048, 5),
    "CIRCUIT_BREAKER_THRESHOLD": ("how many failures in a row trip the breaker", 3, 250, 1),
    "LOG_RETENTION_DAYS": ("how many days logs are kept", 3, 730, 1),
    "HEALTHCHECK_INTERVAL_S": ("how often the health probe runs", 2, 300, 1),
}
MISSING_FIELDS = (
    "shipping_zone", "tax_region", "coupon_code", "warehouse_id", "currency_code",
    "billing_address", "loyalty_tier", "vat_number", "delivery_slot", "price_list",
)  # fmt: skip
MODULES = (
    "orders/pricing", "orders/checkout", "billing/invoices", "billing/tax", "catalog/stock",
    "shipping/rates", "users/profile", "promotions/coupons", "reports/daily", "search/ranker",
)  # fmt: skip
FUNCS = (
    "compute_tax", "apply_coupon", "resolve_zone", "build_invoice", "reserve_stock",
    "quote_rates", "load_profile", "rank_results", "render_report", "price_basket",
    "merge_carts", "settle_payment", "allocate_slot", "validate_address", "sync_levels",
)  # fmt: skip
DATABASES = ("orders", "customers", "billing", "inventory", "analytics", "auth", "catalog")
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
MONTH_NAMES = (
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December",
)  # fmt: skip
# (a symptom, what caused it)
CAUSES = (
    ("the slow checkout pages", "a missing index on orders.customer_id"),
    ("the duplicate confirmation emails", "a retry loop that re-sent after a 202 response"),
    ("the failing nightly reports", "an expired password on the reporting service account"),
    ("the stale search results", "the indexer reading from a lagging replica"),
    ("the spike of 502 errors", "the load balancer draining nodes before they were idle"),
    ("the memory growth in the image workers", "an unbounded in-process thumbnail cache"),
    ("the wrong tax on Irish orders", "rounding applied before the currency conversion"),
    ("the failed logins after the deploy", "clock skew between the authentication nodes"),
    ("the invoices missing from the export", "a cut-off at midnight UTC instead of local time"),
    ("the queue backlog every Monday", "the weekly batch job sharing the consumers' group"),
    ("the flaky integration tests", "two suites writing to one temporary directory"),
    ("the high database CPU", "an ORM query that loaded every order line separately"),
)
# (a topic, what was decided)
DECISIONS = (
    ("the legacy cron jobs", "move them to the workflow scheduler by the end of April"),
    ("the flaky payment tests", "quarantine them in a nightly job until they are fixed"),
    ("the EU customer data", "keep it in the Frankfurt region and nowhere else"),
    ("version 1 of the public API", "switch it off at the end of the quarter"),
    ("the thumbnail cache", "cap it at 512 MB per worker and evict the oldest entries"),
    ("schema migrations", "run them before the traffic switch, never after it"),
    ("the on-call rota", "rotate weekly, handing over on Tuesday mornings"),
    ("the noisy alerts", "page only for errors that customers can see"),
    ("the staging database", "refresh it from an anonymised snapshot every Sunday"),
    ("the old coupon codes", "expire them all on the first of June"),
)
GOALS = (
    "Find out why checkout latency doubled after the Tuesday deploy",
    "Reconcile the March invoices with the payment provider's settlement report",
    "Migrate the inventory database to the new cluster without downtime",
    "Triage the flaky tests that block the release branch",
    "Investigate the rise in failed logins reported by support",
    "Prepare the quarterly cost report for the infrastructure review",
    "Clean up the shipping integration after the carrier changed its API",
    "Audit who can access customer data before the compliance review",
    "Bring the search results back in line with the product catalogue",
    "Reduce the memory use of the image processing workers",
)
PROSE = (
    "I went through the {thing} again and compared it with what we saw yesterday.",
    "The numbers for {service} look normal until about {hh}:{mm}, then the error rate climbs.",
    "Before changing anything, it is worth checking whether {thing} is only a symptom.",
    "One hypothesis for {symptom} is {cause}, but the timing does not fully match.",
    "I will keep an eye on {service}; its latency is higher than usual but within the budget.",
    "The {desc} has been restarted {n} times since the morning, which is unusual.",
    "Here is the part of the configuration that matters for {service}:",
    "The query below reproduces the problem on a copy of the {table} table.",
    "None of the {n} alerts from the last hour point at {service} directly.",
    "We should avoid touching {thing} until the release is out.",
    "If the pattern holds, we can expect {symptom} to return under peak load.",
    "I checked the dashboards for {desc}; nothing stands out after {hh}:{mm}.",
    "To be safe, I would roll out the change to one region first, {region} for instance.",
    "The logs of {service} contain the same warning {n} times, always on {host}.",
    "Let me summarise what we know so far and what is still open.",
    "The test suite passes locally, but the CI runners are slower and time out more often.",
    "This explains part of the delay, not all of it: the rest is spent in {service}.",
    "I compared the row counts in {table} before and after the job; they differ by {n}.",
)
THINGS = (
    "error budget report", "deploy timeline", "traffic graph", "slow query log",
    "incident notes", "release checklist", "capacity plan", "queue metrics", "dependency list",
)  # fmt: skip
USER_TURNS = (
    "Can you look into {symptom}? Customers are starting to notice.",
    "Please check the {desc} logs for anything odd since this morning.",
    "Thanks. Next, compare that with last week's numbers.",
    "What do you need from me to continue?",
    "Go ahead, but keep {service} untouched for now.",
    "Could you pull the latest figures from the billing API?",
    "Summarise what you found so far, briefly.",
    "Is {host} still healthy?",
)
STEPS = (
    ("fetched the last hour of {service} logs", "kubectl"),
    ("queried the {table} table for recent rows", "psql"),
    ("listed the backup directory on {host}", "shell"),
    ("called the invoices endpoint of the billing API", "http"),
    ("ran the integration test suite", "pytest"),
    ("opened the dashboard of {service}", "grafana"),
    ("exported the stock levels as CSV", "shell"),
    ("restarted {service} on {host}", "kubectl"),
)

#: fact kind -> (the category it is reported under: the kind of text it hides in, the kind
#: of item that carries it)
FACTS = {
    "log_timeout": ("log", "log"), "log_rejected": ("log", "log"),
    "json_invoice": ("json", "json"), "json_shipment": ("json", "json"),
    "json_apikey": ("json", "json"),
    "csv_inventory": ("csv", "csv"), "csv_revenue": ("csv", "csv"),
    "config": ("config", "assistant"), "trace": ("trace", "trace"),
    "listing": ("listing", "listing"),
    "cause": ("prose", "assistant"), "decision": ("prose", "assistant"),
}  # fmt: skip
# fact kind -> (direct questions, paraphrased questions)
QUESTIONS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "log_timeout": (
        ("Which host timed out in {service}?",
         "In the {service} logs, on which host did the upstream call time out?"),
        ("On what machine did the {desc} give up waiting for an answer?",
         "Where was the {desc} stuck until its deadline ran out?"),
    ),
    "log_rejected": (
        ("What error code did {service} return when it rejected the batch from {partner}?",
         "Which error code was logged when {service} rejected {partner}'s batch?"),
        ("With which code did the {desc} refuse the upload sent by {partner}?",
         "{partner} had their data turned away by the {desc}: what code came back?"),
    ),
    "json_invoice": (
        ("What is the invoice id of {customer}'s disputed invoice?",
         "Which invoice number did {customer} dispute?"),
        ("Which bill did {customer} contest? I need its reference.",
         "{customer} is arguing about a charge: what's the number on that bill?"),
    ),
    "json_shipment": (
        ("What is the tracking number of the shipment held at customs in {city}?",
         "Which shipment to {city} is held at customs? Give its tracking number."),
        ("Our parcel bound for {city} got stopped at the border: what is its tracking code?",
         "The delivery going to {city} is stuck with the customs officers; how do we trace it?"),
    ),
    "json_apikey": (
        ("Which API key id belongs to {person}?", "What is the id of {person}'s API key?"),
        ("What's the identifier of the access credential issued to {person}?",
         "Which programmatic access token does {person} own?"),
    ),
    "csv_inventory": (
        ("How many {product} units are on hand in {warehouse}?",
         "What is the stock of the {product} in the {warehouse} warehouse?"),
        ("How many of the {product}s did the {warehouse} depot say it still had?",
         "What quantity of {product} was left on the shelves in {warehouse}?"),
    ),
    "csv_revenue": (
        ("What revenue did the {region} region book on {date}?",
         "How much revenue was recorded for {region} on {date}?"),
        ("How much money came in from {region} customers on {date}?",
         "What were the {region} sales worth on {date}?"),
    ),
    "config": (
        ("What value did we set for {setting} in {service}?",
         "In the {service} configuration, what is {setting}?"),
        ("What did we settle on for {meaning} in the {desc}?",
         "For the {desc}, what number did we pick for {meaning}?"),
    ),
    "trace": (
        ("Which function raised the KeyError for '{field}'?",
         "Where was the KeyError '{field}' raised?"),
        ("In which function did the code crash because the {field_words} was missing?",
         "Which part of the code blew up when it could not find a {field_words}?"),
    ),
    "listing": (
        ("How big was the {db} database dump from {month_name} {day}?",
         "What is the size of the {db} backup file of {month_name} {day}?"),
        ("How much disk does the {db} backup taken on {day} {month_name} use?",
         "What did the {db} snapshot of {month_name} {day} weigh on disk?"),
    ),
    "cause": (
        ("What was the root cause of {symptom}?", "What turned out to cause {symptom}?"),
        ("Why did we see {symptom}, in the end?", "What explained {symptom}, once we dug into it?"),
    ),
    "decision": (
        ("What did we decide about {topic}?", "What was the decision on {topic}?"),
        ("What plan did we agree on for {topic}?",
         "How are we going to handle {topic} from now on?"),
    ),
}  # fmt: skip

# item kinds of a generated run and their weights
ITEM_WEIGHTS = {
    "assistant": 22, "user": 8, "step": 15, "log": 14, "json": 14, "trace": 5, "listing": 6,
    "csv": 9,
}  # fmt: skip
TOOLS = {
    "log": ("kubectl logs", "journalctl", "docker logs"),
    "json": ("http GET", "billing-api", "admin-api"),
    "trace": ("pytest", "kubectl logs", "sentry"),
    "listing": ("shell",),
    "csv": ("psql", "bigquery", "export"),
}
