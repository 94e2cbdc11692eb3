"""The REST API (Django REST framework): thin views over :mod:`console.services` and :mod:`console.selectors`."""
