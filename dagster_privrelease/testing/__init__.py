"""Test helpers a model's author can import: ``contract`` runs any registered model through the model contract."""
