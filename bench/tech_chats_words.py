"""The words of bench/tech_chats_data.py: projects, the aspects of building them (grouped by
theme), what a user says and an assistant answers about each, standing instructions and
preferences with the later requests they apply to, and the questions asked at the end.
Made up here; nothing copied."""

from __future__ import annotations

#: (name, stack, the main record it keeps, its language)
PROJECTS = (
    ("expense tracker", "Flask and PostgreSQL", "expense", "Python"),
    ("recipe sharing site", "Django with a React front end", "recipe", "Python"),
    ("sensor dashboard", "FastAPI and TimescaleDB", "reading", "Python"),
    ("book club app", "Express and MongoDB", "meeting", "JavaScript"),
    ("inventory service", "Spring Boot and MySQL", "item", "Java"),
    ("fitness log", "Rails and SQLite", "workout", "Ruby"),
    ("ticket booking system", "Go and PostgreSQL", "booking", "Go"),
    ("photo gallery", "Next.js and S3", "photo", "TypeScript"),
)

#: theme -> the names a user may give it in a question
THEME_NAMES = {
    "database": ("database", "data storage", "data layer"),
    "security": ("security", "authentication and security", "account security"),
    "frontend": ("front end", "user interface", "UI"),
    "deployment": ("deployment", "hosting and release", "infrastructure"),
    "testing": ("testing", "test suite", "quality checks"),
    "performance": ("performance", "speed", "scaling"),
}

#: theme -> aspects: (name a user gives it, sentences an assistant says of it, a code line,
#: follow-up questions a user asks about it). {project}, {entity}, {stack}, {lang} filled in.
ASPECTS: dict[str, tuple[tuple[str, tuple[str, ...], str, tuple[str, ...]], ...]] = {
    "database": (
        (
            "the schema for the {entity} table",
            (
                "A {entity} row should carry its own primary key, a foreign key to its owner "
                "and timestamps, and nothing that can be computed from other columns.",
                "Normalising the categories into their own table keeps renames cheap and "
                "avoids the spelling drift you get with free-text columns.",
                "Use a numeric type with fixed precision for amounts; floating point will "
                "eventually show rounding errors in totals.",
                "Add NOT NULL constraints from the start: loosening a constraint later is "
                "easy, tightening it on a table full of bad rows is not.",
            ),
            "CREATE TABLE {entity}s (id BIGSERIAL PRIMARY KEY, owner_id BIGINT NOT NULL "
            "REFERENCES users(id), created_at TIMESTAMPTZ NOT NULL DEFAULT now());",
            (
                "Should the {entity} table have a separate column for the currency?",
                "Is it a problem that I used a VARCHAR for the date column?",
            ),
        ),
        (
            "indexes for the slow {entity} queries",
            (
                "The query planner falls back to a sequential scan because nothing covers "
                "the filter on owner and date together.",
                "A composite index on (owner_id, created_at) serves both the filter and the "
                "ORDER BY, so the sort step disappears from the plan.",
                "Run EXPLAIN ANALYZE before and after; the estimate of rows should drop from "
                "the whole table to the handful the page shows.",
                "Every index slows writes a little, so drop the single-column ones the "
                "composite index makes redundant.",
            ),
            "CREATE INDEX CONCURRENTLY {entity}s_owner_created ON {entity}s (owner_id, "
            "created_at DESC);",
            (
                "The list page still takes two seconds, what else could the planner be doing?",
                "Do I need a separate index for the search by title?",
            ),
        ),
        (
            "database migrations",
            (
                "Keep every schema change in a versioned migration file, never an ad hoc "
                "ALTER run by hand on the server.",
                "A migration that adds a column with a default rewrites the table on older "
                "versions; add it nullable, backfill in batches, then set the default.",
                "Test each migration downwards as well as upwards on a copy of production "
                "data before it ships.",
                "Name migrations after what they do, not after the ticket number, so the "
                "history reads like a changelog.",
            ),
            "def upgrade():\n    op.add_column('{entity}s', sa.Column('notes', sa.Text(), "
            "nullable=True))",
            (
                "How do I rename a column without breaking the running version?",
                "The migration failed halfway on staging, how do I recover?",
            ),
        ),
        (
            "backups of the database",
            (
                "A nightly logical dump is a start, but restoring it loses everything since "
                "midnight; continuous WAL archiving gives point-in-time recovery.",
                "A backup you have never restored is a hope, not a backup: schedule a monthly "
                "restore drill into a scratch database.",
                "Keep at least one copy in a different account or provider so that one "
                "compromised credential cannot delete both.",
                "Encrypt the dumps at rest and keep the key somewhere the backup job cannot "
                "overwrite.",
            ),
            "pg_dump --format=custom --file=/backups/{entity}s-$(date +%F).dump $DATABASE_URL",
            (
                "How long should I keep the old backups around?",
                "Can I restore a single table from the custom-format dump?",
            ),
        ),
    ),
    "security": (
        (
            "password hashing",
            (
                "Store only a slow, salted hash of each password; bcrypt or argon2id are the "
                "usual choices and both handle the salt for you.",
                "Never compare hashes with ==; use the library's constant-time verify function.",
                "Pick a work factor that makes one hash take about a quarter of a second on "
                "your server, and raise it as hardware gets faster.",
                "When a user logs in with an old hash format, re-hash the password with the "
                "new parameters transparently.",
            ),
            "hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=12))",
            (
                "Is bcrypt still fine or should I switch to argon2?",
                "How do I migrate the users that still have MD5 hashes?",
            ),
        ),
        (
            "login sessions with access and refresh tokens",
            (
                "Short-lived access tokens of about fifteen minutes limit the damage of a "
                "leaked token, and a refresh token renews them without a new login.",
                "Keep the refresh token in an HttpOnly, Secure, SameSite cookie so scripts on "
                "the page cannot read it.",
                "Rotate refresh tokens on every use and revoke the whole family when an old "
                "one is presented twice: that is the sign of theft.",
                "Sign tokens with an asymmetric key if other services need to verify them "
                "without being able to mint them.",
            ),
            "token = jwt.encode({{'sub': user_id, 'exp': now + timedelta(minutes=15)}}, "
            "SECRET, algorithm='HS256')",
            (
                "Where should the front end keep the access token between page loads?",
                "How do I log a user out everywhere at once?",
            ),
        ),
        (
            "rate limiting the login endpoint",
            (
                "Limit attempts per account and per IP address separately; attackers spread "
                "guesses over many addresses and many accounts.",
                "A sliding window of five failures per fifteen minutes, followed by an "
                "increasing delay, stops guessing without locking out real users for long.",
                "Keep the counters in Redis with an expiry so that they survive restarts "
                "of the web processes and are shared between them.",
                "Return the same error for a wrong password and an unknown account so the "
                "endpoint does not reveal which emails are registered.",
            ),
            "@limiter.limit('5 per 15 minutes', key_func=lambda: request.form['email'])",
            (
                "Will the rate limit block everyone behind the office NAT?",
                "Should I add a captcha after a few failures?",
            ),
        ),
        (
            "keeping secrets out of the repository",
            (
                "Read credentials from environment variables or a secret manager at start-up "
                "and fail fast when one is missing.",
                "Add the .env file to .gitignore and commit a .env.example with the names "
                "but not the values.",
                "If a key was ever committed, rotate it: removing it from the history does "
                "not remove it from every clone.",
                "Give each environment its own credentials so a leaked staging key cannot "
                "touch production.",
            ),
            "DATABASE_URL = os.environ['DATABASE_URL']  # fails at start-up when unset",
            (
                "I accidentally pushed the API key last week, what should I do now?",
                "How do I pass the secrets to the container without baking them in?",
            ),
        ),
    ),
    "frontend": (
        (
            "a responsive layout for the {entity} list",
            (
                "CSS grid with auto-fill and minmax lets the cards wrap from four columns on "
                "a desktop to one on a phone without media queries.",
                "Start from the narrowest screen and add breakpoints only where the content "
                "breaks, not at device widths.",
                "Use relative units for spacing and font sizes so the layout follows the "
                "user's zoom and font settings.",
                "Test on a real phone too: the emulator does not show how thumbs reach the "
                "buttons at the bottom of the screen.",
            ),
            ".{entity}-grid {{ display: grid; grid-template-columns: repeat(auto-fill, "
            "minmax(16rem, 1fr)); gap: 1rem; }}",
            (
                "The cards have different heights and the grid looks ragged, how do I fix it?",
                "How do I keep the filter bar visible while scrolling?",
            ),
        ),
        (
            "form validation messages",
            (
                "Validate on the server always and in the browser for comfort; the browser "
                "check can be bypassed by anyone with a terminal.",
                "Show each message next to its field, in words that say how to fix the "
                "value rather than what rule it broke.",
                "Validate a field when it loses focus, not on every keystroke, so users are "
                "not scolded for an email address they have not finished typing.",
                "Keep the values the user typed when the server rejects the form; losing "
                "them is the most common complaint about forms.",
            ),
            "if (!amount.checkValidity()) showError(amount, 'Enter an amount like 12.50');",
            (
                "How do I show the server's validation errors next to the right fields?",
                "Should the submit button be disabled until the form is valid?",
            ),
        ),
        (
            "a dark mode toggle",
            (
                "Define colours as CSS custom properties and switch one attribute on the "
                "root element instead of maintaining two stylesheets.",
                "Respect prefers-color-scheme for the first visit, then remember the user's "
                "explicit choice in local storage.",
                "Set the attribute in a small inline script in the head so the page does not "
                "flash white before the theme loads.",
                "Check contrast ratios in both themes; muted greys that work on white often "
                "fail on a dark background.",
            ),
            ":root[data-theme='dark'] {{ --bg: #121212; --fg: #e6e6e6; }}",
            (
                "The charts stay white in dark mode, how do I theme them?",
                "How do I test both themes in the screenshot tests?",
            ),
        ),
        (
            "accessibility for screen reader users",
            (
                "Use real buttons and links instead of clickable divs; they come with "
                "keyboard focus and the right role for free.",
                "Every input needs a label element tied to it, not just a placeholder that "
                "disappears as soon as the user types.",
                "Announce asynchronous updates, such as a saved {entity}, through an "
                "aria-live region.",
                "Run an automated checker in CI, and once a release try the main flow with "
                "the keyboard only and a screen reader.",
            ),
            '<div aria-live="polite" id="status"></div>',
            (
                "How do I make the custom dropdown usable with the keyboard?",
                "Which automated accessibility checker works well in CI?",
            ),
        ),
    ),
    "deployment": (
        (
            "a Dockerfile with a multi-stage build",
            (
                "Build the dependencies in a first stage and copy only the artefacts into a "
                "slim runtime image; the image shrinks and the attack surface with it.",
                "Order the instructions from least to most frequently changed so the layer "
                "cache survives a code change.",
                "Run the process as a non-root user and pin the base image by digest, not by "
                "a moving tag.",
                "Add a health check so the orchestrator knows when the container is ready, "
                "not merely started.",
            ),
            "FROM python:3.12-slim AS runtime\nCOPY --from=build /app /app\nUSER app",
            (
                "The image is still 900 MB, what usually makes it that big?",
                "Why does every build reinstall all the dependencies?",
            ),
        ),
        (
            "a CI pipeline on GitHub Actions",
            (
                "Run the linter, the type checker and the tests on every pull request, and "
                "make the main branch protected so nothing merges red.",
                "Cache the dependency downloads keyed on the lock file's hash to cut minutes "
                "from each run.",
                "Split slow end-to-end tests into their own job so a failing unit test "
                "reports in two minutes instead of fifteen.",
                "Keep deployment credentials in the repository's encrypted secrets and give "
                "the workflow token the least permissions it needs.",
            ),
            "- uses: actions/cache@v4\n  with:\n    key: deps-${{{{ hashFiles('**/*.lock') }}}}",
            (
                "The pipeline takes twenty minutes, where do I start cutting?",
                "How do I run the deploy job only when a tag is pushed?",
            ),
        ),
        (
            "deploying to a VPS behind nginx",
            (
                "Put nginx in front of the application server to terminate TLS, serve static "
                "files and buffer slow clients.",
                "Run the application under systemd with Restart=on-failure so a crash at "
                "night does not wait for you to wake up.",
                "Keep the firewall closed except for ports 22, 80 and 443, and allow SSH "
                "with keys only.",
                "Certificates from Let's Encrypt renew themselves with certbot's timer; test "
                "the renewal with a dry run once.",
            ),
            "location / {{ proxy_pass http://127.0.0.1:8000; proxy_set_header Host $host; }}",
            (
                "nginx returns 502 after the deploy, what should I check first?",
                "How do I serve the uploaded files without going through the app?",
            ),
        ),
        (
            "zero-downtime releases",
            (
                "Start the new version beside the old one, send traffic to it once its health "
                "check passes, then stop the old one.",
                "Make each database migration compatible with both the old and the new code, "
                "so the two can run side by side during the switch.",
                "Keep the previous release on disk so that rolling back is a symlink change, "
                "not a rebuild.",
                "Drain long-running requests before stopping the old processes; a grace "
                "period of thirty seconds covers most of them.",
            ),
            "ln -sfn /srv/releases/$RELEASE /srv/current && systemctl reload app",
            (
                "How do I roll back if the new release breaks checkout?",
                "Do background workers need the same treatment as the web processes?",
            ),
        ),
    ),
    "testing": (
        (
            "unit tests with fixtures",
            (
                "A fixture builds the objects a test needs, so each test reads as the "
                "behaviour it checks and nothing else.",
                "Give every test its own transaction and roll it back at the end; tests "
                "that share rows fail in orders nobody can reproduce.",
                "Name tests after the behaviour, like test_total_ignores_deleted_{entity}s, "
                "so a failure explains itself in the report.",
                "Prefer factories with sensible defaults over giant shared fixture files.",
            ),
            "@pytest.fixture\ndef {entity}(db):\n    return {entity}_factory(owner=user_factory())",
            (
                "My fixtures depend on each other in a long chain, is that a smell?",
                "How do I test the code that depends on the current time?",
            ),
        ),
        (
            "mocking the payment provider",
            (
                "Wrap the provider's client in a small interface of your own and fake that "
                "interface in tests, not the HTTP library underneath.",
                "Record a few real responses in the provider's sandbox and replay them, so "
                "the fake answers the way the real service does.",
                "Test the unhappy paths on purpose: declined cards, timeouts and a webhook "
                "that arrives twice.",
                "Keep one small suite that talks to the real sandbox nightly to catch changes "
                "in the provider's API.",
            ),
            "client = FakePayments(responses={{'charge': {{'status': 'declined'}}}})",
            (
                "The webhook tests are flaky, how can I make them deterministic?",
                "Should the fake live in the tests folder or in the application code?",
            ),
        ),
        (
            "end-to-end browser tests",
            (
                "Cover the few journeys that make money or lose data end to end; everything "
                "else is cheaper to test below the browser.",
                "Select elements by role and visible text, not by CSS classes that change "
                "with every redesign.",
                "Wait for conditions, never for fixed sleeps; a sleep is either too short on "
                "CI or too long everywhere.",
                "Start each test from a seeded database state through an API call instead of "
                "clicking through setup screens.",
            ),
            "await page.getByRole('button', {{ name: 'Save {entity}' }}).click();",
            (
                "The browser tests pass locally but time out on CI, why?",
                "How do I log in once and reuse the session across tests?",
            ),
        ),
        (
            "measuring test coverage",
            (
                "Coverage tells you what was executed, not what was checked; use it to find "
                "untested code, not as a grade.",
                "Branch coverage is more telling than line coverage: an if without its else "
                "shows up as a partial branch.",
                "Fail the build when coverage of changed lines drops, rather than chasing a "
                "global percentage.",
                "Exclude generated code and migrations from the report so the number means "
                "something.",
            ),
            "pytest --cov=app --cov-branch --cov-report=term-missing",
            (
                "Coverage says 92% but bugs still slip through, what am I missing?",
                "How do I see coverage only for the lines changed in a pull request?",
            ),
        ),
    ),
    "performance": (
        (
            "caching {entity} lookups in Redis",
            (
                "Cache the expensive, read-mostly lookups, and give each key an expiry so a "
                "missed invalidation heals itself.",
                "Invalidate on write by deleting the key, not by updating it, to avoid racing "
                "writers leaving a stale value behind.",
                "Guard against a stampede when a hot key expires: let one request recompute "
                "while the others wait or get the old value.",
                "Measure the hit ratio; a cache below about 80% hits often costs more than "
                "it saves.",
            ),
            "cached = redis.get(f'{entity}:{{id}}') or load_and_cache(id, ttl=300)",
            (
                "How do I invalidate the cache when a {entity} is edited?",
                "Should I cache the whole page or just the query results?",
            ),
        ),
        (
            "pagination of the {entity} list",
            (
                "Offset pagination gets slower with every page, because the database still "
                "reads and discards all the skipped rows.",
                "Keyset pagination remembers the last row's sort key and asks for rows after "
                "it, so page 500 costs the same as page 1.",
                "Return a cursor token instead of page numbers in the API, and let the "
                "client ask for the next page with it.",
                "Cap the page size on the server even if the client asks for more.",
            ),
            "SELECT * FROM {entity}s WHERE (created_at, id) < (%s, %s) ORDER BY created_at "
            "DESC, id DESC LIMIT 50;",
            (
                "How do I show a total count with keyset pagination?",
                "Can the user still jump to the last page?",
            ),
        ),
        (
            "profiling the slow endpoints",
            (
                "Measure before optimising: a profiler on the slow request usually points at "
                "one query or one loop, rarely where you expected.",
                "Look for the N+1 pattern, one query for the list and one per row; eager "
                "loading turns it into two queries.",
                "Keep a latency percentile, not an average, on the dashboard; the slow tail "
                "is what users remember.",
                "Profile with production-like data sizes; a query that is instant on fifty "
                "rows can take seconds on five million.",
            ),
            "with cProfile.Profile() as profiler:\n    handle_request()\nprofiler.print_stats"
            "('cumulative')",
            (
                "The profiler shows most time in serialisation, is that normal?",
                "How do I find the N+1 queries automatically?",
            ),
        ),
        (
            "background jobs for slow work",
            (
                "Move anything slower than a few hundred milliseconds, such as emails and "
                "report generation, out of the request into a job queue.",
                "Make each job idempotent: queues deliver at least once, so a job may run "
                "twice after a worker crash.",
                "Store the job's arguments, not whole objects, and load fresh data when the "
                "job runs.",
                "Watch the queue length; a growing backlog is the first sign the workers "
                "cannot keep up.",
            ),
            "send_receipt.delay({entity}_id={entity}.id)  # the worker loads it fresh",
            (
                "How many workers should I run for the report jobs?",
                "What happens to queued jobs when I deploy a new version?",
            ),
        ),
    ),
}

#: how a user opens an aspect ({aspect}, {project}, {stack}, {entity})
OPENINGS = (
    "Next I want to work on {aspect} for my {project}. It's built with {stack}. {ask}",
    "Okay, moving on. I need to sort out {aspect} in the {project}. {ask}",
    "Today I'd like to tackle {aspect}. Right now the {project} has nothing for it. {ask}",
    "I've been putting off {aspect} for the {project}, but it's time. {ask}",
    "New topic: {aspect}. How would you approach it for a {stack} app like mine? {ask}",
    "Can we look at {aspect}? I read a few blog posts but I'm not sure what applies to a "
    "{project}. {ask}",
)
ASKS = (
    "Where should I start?",
    "What would you do first?",
    "What are the usual mistakes?",
    "Can you give me a concrete plan?",
    "Please walk me through it.",
)
#: what a user adds about the project around a question
USER_NOTES = (
    "For context, we have about {n} users so far and most of them are on phones.",
    "I'm the only developer on this, so I prefer things I can maintain alone.",
    "The {entity} pages get most of the traffic.",
    "I tried a quick version yesterday but it got messy.",
    "My friend who tests the app keeps reporting odd behaviour around this.",
    "I'd like to ship this before the end of the month.",
)
#: how an assistant opens and closes its answers
ANSWER_OPENINGS = (
    "Good question. Here is how I would approach {aspect} for a {project}.",
    "Let's break {aspect} down into a few steps.",
    "There are a few moving parts to {aspect}; I'll go through them in order.",
    "Sure. For a {stack} project, {aspect} mostly comes down to a handful of decisions.",
)
ANSWER_CLOSINGS = (
    "Once this is in place, the next thing worth looking at is monitoring it in production.",
    "If you paste the error you get after trying this, I can narrow it down.",
    "Let me know how it behaves with real data and we can adjust.",
    "This should keep things manageable while the {project} grows.",
)
#: general sentences an assistant pads its explanations with
GENERIC = (
    "It helps to write down why a choice was made, so that the next person does not undo it.",
    "Start with the simplest version that works, measure it, and only then add complexity.",
    "Keep the change small enough to review in one sitting.",
    "Make sure the behaviour is covered by a test before you refactor it.",
    "Most of the cost here is in the edge cases, not the happy path.",
    "A short checklist in the README saves a lot of questions later.",
    "If in doubt, prefer the boring, widely used option over the clever one.",
    "Log enough context to understand a failure without a debugger attached.",
    "Think about what happens when this runs twice, or not at all.",
    "Keep configuration in one place so that environments differ only in values.",
)
SMALL_TALK = (
    (
        "Thanks, that worked. Quick unrelated question: how do I undo my last git commit "
        "without losing the changes?",
        "Use git reset --soft HEAD~1: the commit is undone and its changes stay staged. If you "
        "already pushed it, prefer git revert, which adds a new commit instead of rewriting "
        "history that others may have pulled.",
    ),
    (
        "Random thought, what's a good way to name branches for a solo project?",
        "Something like feature/short-description or fix/short-description is plenty; the "
        "prefix sorts them and the description tells you what is inside without opening it.",
    ),
    (
        "I'm a bit tired of this today. Any tips for staying motivated on a side project?",
        "Keep a short list of small tasks you can finish in an evening, ship something "
        "visible every week, and write down what you did so progress stays visible on the "
        "days it does not feel like it.",
    ),
    (
        "Do you think I should write a blog post about building this?",
        "Yes, if you enjoy writing: explaining a decision is a good test of whether you "
        "understood it, and the post becomes documentation for your future self.",
    ),
)

#: standing instructions: (what the user says, a later request it applies to)
INSTRUCTIONS = (
    (
        "From now on, always include type hints when you show me {lang} functions.",
        (
            "Can you write the function that imports a CSV export of {entity}s?",
            "Show me a helper that groups {entity}s by month.",
        ),
    ),
    (
        "When you suggest SQL, always use explicit JOIN syntax, never commas in the FROM clause.",
        (
            "How would I query each {entity} together with its owner's name?",
            "What query lists the owners with no {entity} in the last month?",
        ),
    ),
    (
        "Please always give version numbers when you recommend a library.",
        (
            "Which library should I use to generate PDF reports?",
            "What should I use to send emails from the {project}?",
        ),
    ),
    (
        "Whenever we talk about deployment steps, always list the rollback step as well.",
        (
            "How do I ship the new release of the {project} to the server?",
            "What are the steps to move the {project} to a bigger server?",
        ),
    ),
    (
        "Always explain the time complexity when you propose an algorithm.",
        (
            "What's a good way to find duplicate {entity}s in a list?",
            "How can I merge two sorted lists of {entity}s efficiently?",
        ),
    ),
    (
        "Never use inline styles in the HTML you give me, use CSS classes instead.",
        (
            "Can you give me the markup for the settings page?",
            "Write the HTML for a card that shows one {entity}.",
        ),
    ),
    (
        "When you show shell commands, add a comment explaining each flag.",
        (
            "How do I check which process is using port 8000?",
            "How can I find the biggest files on the server's disk?",
        ),
    ),
    (
        "Always mention the test I should write for any fix you suggest.",
        (
            "The totals are sometimes off by one cent, how do I fix it?",
            "Deleting a {entity} sometimes leaves orphaned rows behind, what's the fix?",
        ),
    ),
    (
        "Please keep code examples under thirty lines; split them if they get longer.",
        (
            "Can you show me how to build the export to spreadsheet feature?",
            "Write the code for the weekly summary email.",
        ),
    ),
    (
        "Make sure to put any configuration values in environment variables in your "
        "examples, never hard-coded.",
        (
            "How do I connect the {project} to the mail server?",
            "Show me how to set up the connection to the object storage.",
        ),
    ),
)
#: preferences: (what the user says, a later request it bears on)
PREFERENCES = (
    (
        "I prefer small libraries with few dependencies over big frameworks.",
        (
            "What should I use to validate the form input?",
            "Which tool would you pick for scheduling the nightly jobs?",
        ),
    ),
    (
        "I'd rather use plain CSS than a utility framework like Tailwind.",
        (
            "How should I style the new dashboard page?",
            "What's the quickest way to make the navigation bar look decent?",
        ),
    ),
    (
        "I prefer PostgreSQL features over adding another service whenever possible.",
        (
            "Where should I keep the search index for {entity}s?",
            "How should I implement a job queue for the reports?",
        ),
    ),
    (
        "I'd rather have explicit code than clever one-liners, even if it's longer.",
        (
            "How can I flatten the nested list of tags?",
            "What's a neat way to count {entity}s per category?",
        ),
    ),
    (
        "My preference is to self-host things rather than pay for managed services.",
        (
            "Where should I run the error tracking for the {project}?",
            "What should I use for the uptime monitoring?",
        ),
    ),
    (
        "I prefer functional components and hooks over class components.",
        (
            "How should I structure the {entity} editor component?",
            "Can you sketch the component for the filter sidebar?",
        ),
    ),
    (
        "I generally prefer server-rendered pages over a single-page app.",
        (
            "How should I build the new reports section?",
            "What's the best way to add live search to the {entity} list?",
        ),
    ),
    (
        "I'd rather write integration tests against a real database than mock the ORM.",
        (
            "How should I test the monthly report query?",
            "What's a good way to test the {entity} import?",
        ),
    ),
)
#: question forms ({theme}, {project})
ORDERING_QUESTIONS = (
    "In what order did I bring up the different {theme} topics for my {project}?",
    "Can you list, in order, the {theme} issues I raised while building the {project}?",
    "Walk me through the sequence of {theme} things we worked on, from first to last.",
    "What was the order of the {theme} questions I asked you about the {project}?",
)
ORDERING_ALL = (
    "List the order in which I brought up the different parts of my {project} throughout "
    "our conversations.",
    "In which order did we work on the main aspects of the {project}?",
)
SUMMARY_QUESTIONS = (
    "Can you summarise how the {theme} side of my {project} developed over our conversations?",
    "Give me an overview of everything we discussed about {theme} for the {project}.",
    "Recap the {theme} work we did on the {project}, briefly.",
)
#: facts a user states once: (setting, its values, a direct question, a paraphrase)
FACTS = (
    (
        "connection pool size",
        ("10", "20", "25", "40"),
        "What did I set the connection pool size to?",
        "How many database connections does the app keep open at most?",
    ),
    (
        "access token lifetime",
        ("10 minutes", "15 minutes", "30 minutes", "one hour"),
        "What lifetime did I give the access tokens?",
        "How long does a login token stay valid before it has to be refreshed?",
    ),
    (
        "bcrypt cost factor",
        ("11", "12", "13", "14"),
        "Which bcrypt cost factor did I choose?",
        "How expensive did we make the password hashing?",
    ),
    (
        "page size of the list endpoint",
        ("20", "25", "50", "100"),
        "What page size does the list endpoint use?",
        "How many rows does one page of results return?",
    ),
    (
        "cache expiry",
        ("60 seconds", "five minutes", "ten minutes", "an hour"),
        "What expiry did I put on the cached entries?",
        "How long do cached lookups live before they are recomputed?",
    ),
    (
        "server size",
        ("a 2 GB VPS", "a 4 GB VPS", "an 8 GB VPS", "a Raspberry Pi 5"),
        "What kind of server does the app run on?",
        "Where is the production app hosted, what machine?",
    ),
    (
        "backup retention",
        ("7 days", "14 days", "30 days", "90 days"),
        "How long do I keep the database backups?",
        "After how many days are old dumps deleted?",
    ),
    (
        "number of job workers",
        ("2", "3", "4", "6"),
        "How many background workers do I run?",
        "How many processes take jobs off the queue?",
    ),
    (
        "mobile breakpoint",
        ("600px", "640px", "720px", "768px"),
        "At what width does the layout switch to the mobile version?",
        "Which screen width did we pick for the phone layout?",
    ),
    (
        "coverage threshold",
        ("70%", "80%", "85%", "90%"),
        "What coverage threshold fails the build?",
        "Below what percentage of tested code does CI go red?",
    ),
)
FACT_STATEMENTS = (
    "By the way, I set the {setting} to {value}.",
    "Small update: the {setting} is {value} for now.",
    "For the record, we went with {value} as the {setting}.",
)
UPDATE_STATEMENTS = (
    "Change of plan: the {setting} is now {value} instead of {old}.",
    "I changed the {setting} from {old} to {value} after some testing.",
)
UPDATE_QUESTIONS = (
    "What is the {setting} now, after the latest change?",
    "What's the current {setting}?",
)
