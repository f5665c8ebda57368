-- One Postgres for both servers: Prefect uses the `prefect` database (POSTGRES_DB), MLflow this one.
CREATE DATABASE mlflow;
