"""The broker_core console: a Django project and app serving the REST API under ``/api/v1/``.

It talks to brokers and the name server only through ``broker_core.client`` (see :mod:`console.broker_client`).
"""
