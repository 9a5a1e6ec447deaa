# pydantic-generated schemas for the corpus (run once; the output is committed)
import json, datetime, uuid, enum
from typing import Literal, Optional, Union
from pydantic import BaseModel, Field, ConfigDict
class Status(str, enum.Enum):
    todo = "todo"; doing = "doing"; done = "done"
class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")
class Subtask(Strict):
    title: str = Field(min_length=1, max_length=60)
    done: bool = False
class Task(Strict):
    id: int = Field(ge=1)
    title: str
    status: Status
    priority: Literal[1, 2, 3] = 2
    due: Optional[datetime.date] = None
    owner: Optional[uuid.UUID] = None
    estimate_hours: Optional[float] = Field(default=None, ge=0, le=1000)
    subtasks: list[Subtask] = Field(default_factory=list, max_length=5)
class Project(Strict):
    name: str
    tasks: list[Task]
    lead: Union[str, int, None] = None
json.dump(Project.model_json_schema(), open("tests/data/schemas/pydantic_project.json", "w"), indent=2)
class Comment(Strict):
    author: str
    text: str
    replies: list["Comment"] = []
json.dump(Comment.model_json_schema(), open("tests/data/schemas/pydantic_recursive_comments.json", "w"), indent=2)
