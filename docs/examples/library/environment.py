"""The library's environment, written against tau2-bench's public framework (a DB, a toolkit, a policy).

This is the module a ``Tau2Pack`` names in ``tau2_module``: it has tau2's three functions,
``get_environment``, ``get_tasks`` and ``get_tasks_split``. The DB is small and built in code (a real
domain would load a JSON file), and so are its six benchmark tasks (``OFFICIAL``), in one split, ``base``.
"""
from __future__ import annotations

from pydantic import BaseModel, Field
from tau2.data_model.tasks import Task
from tau2.environment.db import DB
from tau2.environment.environment import Environment
from tau2.environment.toolkit import ToolKitBase, ToolType, is_tool

MAX_LOANS = 3  # books a member may hold at once (the policy below, and policy.py, say so)

POLICY = f"""# Library desk policy

You help members of the city library borrow and return books.

- Identify the member by their member id before anything else, and look up what you act on.
- A member may hold at most {MAX_LOANS} books at once: refuse a loan that would go above that.
- A member with unpaid fines may not borrow until the fines are paid (you cannot take payments).
- A member can only return a book they hold.
- Before every change (a loan or a return), describe it with the member id and book id and get an explicit yes.
"""


class Book(BaseModel):
    book_id: str = Field(description="Unique identifier of the book")
    title: str = Field(description="The book's title")
    on_loan_to: str | None = Field(None, description="The member holding the book, if any")


class Member(BaseModel):
    member_id: str = Field(description="Unique identifier of the member")
    name: str = Field(description="The member's name")
    loans: list[str] = Field(default_factory=list, description="Ids of the books the member holds")
    fines: int = Field(0, description="Unpaid fines, in euros")


class LibraryDB(DB):
    """Members and books of one small library."""

    books: dict[str, Book] = Field(description="Books by id")
    members: dict[str, Member] = Field(description="Members by id")


def initial_db() -> LibraryDB:
    titles = ["Dune", "Emma", "Ulysses", "Beloved", "Solaris", "Middlemarch", "Hyperion", "Kindred",
              "Persuasion", "Neuromancer", "Rebecca", "Foundation", "Frankenstein", "Walden", "Ubik", "Coraline"]
    books = {f"B{n:03d}": Book(book_id=f"B{n:03d}", title=t) for n, t in enumerate(titles, 1)}
    members: dict[str, Member] = {}
    # loans and fines chosen so every rule has members it applies to
    for n, (name, held, fines) in enumerate([("Ada", [], 0), ("Ben", ["B001"], 0), ("Cleo", ["B002", "B003"], 0),
                                             ("Dev", ["B004", "B005", "B006"], 0), ("Eli", [], 12),
                                             ("Fay", ["B007"], 5), ("Gus", [], 0), ("Hana", ["B008", "B009"], 0)]):
        member_id = f"M{n + 1:02d}"
        members[member_id] = Member(member_id=member_id, name=name, loans=list(held), fines=fines)
        for book_id in held:
            books[book_id].on_loan_to = member_id
    return LibraryDB(books=books, members=members)


class LibraryTools(ToolKitBase):
    """The desk's tools: two lookups, two changes, a hand-off."""

    db: LibraryDB

    def __init__(self, db: LibraryDB) -> None:
        super().__init__(db)

    def _member(self, member_id: str) -> Member:
        if member_id not in self.db.members:
            raise ValueError(f"Member {member_id} not found")
        return self.db.members[member_id]

    def _book(self, book_id: str) -> Book:
        if book_id not in self.db.books:
            raise ValueError(f"Book {book_id} not found")
        return self.db.books[book_id]

    @is_tool(ToolType.READ)
    def get_member_details(self, member_id: str) -> Member:
        """Get a member's details: the books they hold and their unpaid fines.

        Args:
            member_id: The member's id, such as 'M01'.
        """
        return self._member(member_id)

    @is_tool(ToolType.READ)
    def get_book_details(self, book_id: str) -> Book:
        """Get a book's details, including who holds it.

        Args:
            book_id: The book's id, such as 'B001'.
        """
        return self._book(book_id)

    @is_tool(ToolType.WRITE)
    def borrow_book(self, member_id: str, book_id: str) -> Member:
        """Lend a book to a member.

        Args:
            member_id: The member's id.
            book_id: The id of the book to lend.
        """
        member, book = self._member(member_id), self._book(book_id)
        if book.on_loan_to is not None:
            raise ValueError(f"Book {book_id} is on loan")
        book.on_loan_to = member_id
        member.loans.append(book_id)
        return member

    @is_tool(ToolType.WRITE)
    def return_book(self, member_id: str, book_id: str) -> Member:
        """Take back a book a member holds.

        Args:
            member_id: The member's id.
            book_id: The id of the book returned.
        """
        member, book = self._member(member_id), self._book(book_id)
        if book_id not in member.loans:
            raise ValueError(f"Member {member_id} does not hold book {book_id}")
        book.on_loan_to = None
        member.loans.remove(book_id)
        return member

    @is_tool(ToolType.GENERIC)
    def transfer_to_human_agents(self, summary: str) -> str:
        """Transfer the member to a librarian, with a summary of the request.

        Args:
            summary: What the member needs.
        """
        return "Transfer successful"


def get_environment(db: LibraryDB | None = None, solo_mode: bool = False) -> Environment:
    return Environment(domain_name="library", policy=POLICY, tools=LibraryTools(db if db is not None else initial_db()))


# The domain's own benchmark tasks ("official" in tau2's sense): (id, member, request, gold actions, what the agent
# must say). The fixed official-matched test set is drawn to match their cells (family, outcome, writes, reads).
OFFICIAL = [
    ("0", "M01", "borrow book B010", [("get_member_details", {"member_id": "M01"}),
                                      ("get_book_details", {"book_id": "B010"}),
                                      ("borrow_book", {"member_id": "M01", "book_id": "B010"})], []),
    ("1", "M02", "return book B001", [("get_member_details", {"member_id": "M02"}),
                                      ("return_book", {"member_id": "M02", "book_id": "B001"})], []),
    ("2", "M07", "borrow books B011 and B012", [("get_member_details", {"member_id": "M07"}),
                                                ("get_book_details", {"book_id": "B011"}),
                                                ("borrow_book", {"member_id": "M07", "book_id": "B011"}),
                                                ("get_book_details", {"book_id": "B012"}),
                                                ("borrow_book", {"member_id": "M07", "book_id": "B012"})], []),
    ("3", "M04", "borrow book B013", [("get_member_details", {"member_id": "M04"})], ["cannot"]),
    ("4", "M05", "borrow book B014", [("get_member_details", {"member_id": "M05"})], ["cannot"]),
    ("5", "M08", "return books B008 and B009", [("get_member_details", {"member_id": "M08"}),
                                                ("return_book", {"member_id": "M08", "book_id": "B008"}),
                                                ("return_book", {"member_id": "M08", "book_id": "B009"})], []),
]


def get_tasks(task_split_name: str | None = None) -> list[Task]:
    tasks = [Task.model_validate({
        "id": task_id,
        "user_scenario": {"instructions": {
            "domain": "library", "reason_for_call": f"You want to {request}.",
            "known_info": f"Your member id is {member_id}.",
            "unknown_info": "You do not know the library's internal rules.",
            "task_instructions": "Confirm each change with 'yes' when the agent describes it."}},
        "evaluation_criteria": {
            "actions": [{"action_id": f"{task_id}-{n}", "name": name, "arguments": args}
                        for n, (name, args) in enumerate(actions)],
            "communicate_info": info, "reward_basis": ["DB", "COMMUNICATE"]}})
        for task_id, member_id, request, actions, info in OFFICIAL]
    wanted = set(get_tasks_split().get(task_split_name, [])) if task_split_name else None
    return [t for t in tasks if wanted is None or t.id in wanted]


def get_tasks_split() -> dict[str, list[str]]:
    return {"base": [t[0] for t in OFFICIAL]}
