from .files import STREETS_NAME as STREETS_NAME
from .job import StreetJob as StreetJob
from .runner import Streets as Streets
from .runner import StreetsRequest as StreetsRequest
from .schema import STREET_TAIL as STREET_TAIL
